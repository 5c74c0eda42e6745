// Package secrets checks that no secret reaches a log: it runs the local stack with Tailor's
// binaries at high verbosity, schedules a few pods, and scans every component's log for the
// stack's credentials (its kubeconfigs' client keys and tokens, its private keys, its AWS
// secret access key) and for the shapes credentials take in text.
package secrets

import (
	"bufio"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// windowLength is how much of a credential is looked for: enough to be unique, short enough
// to be found when a log line wraps or truncates it.
const windowLength = 40

// Needle is a string that must not appear in a log.
type Needle struct {
	// What names the secret, for the report; never the secret itself.
	What string
	// Text is looked for, case-insensitively when Fold is set.
	Text string
	Fold bool
}

// Finding is a needle found in a log.
type Finding struct {
	File string
	Line int
	What string
}

func (f Finding) String() string { return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.What) }

// Patterns are the shapes credentials take in text, whoever they belong to.
var Patterns = []Needle{
	{What: "an Authorization: Bearer header", Text: "authorization: bearer", Fold: true},
	{What: "an aws_secret_access_key setting", Text: "aws_secret_access_key", Fold: true},
	{What: "a PEM block", Text: "-----BEGIN"},
}

// Scan returns every line of r, the log name, that holds a needle.
func Scan(name string, r io.Reader, needles []Needle) ([]Finding, error) {
	var found []Finding
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		lower := strings.ToLower(text)
		for _, n := range needles {
			if n.Fold && strings.Contains(lower, strings.ToLower(n.Text)) || !n.Fold && strings.Contains(text, n.Text) {
				found = append(found, Finding{File: name, Line: line, What: n.What})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return found, nil
}

// KubeconfigNeedles returns the credentials of every kubeconfig in dir: bearer tokens, and
// client keys both as the kubeconfig holds them (base64 of the PEM) and as the PEM's body.
func KubeconfigNeedles(dir string) ([]Needle, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.kubeconfig"))
	if err != nil {
		return nil, err
	}
	var needles []Needle
	for _, path := range paths {
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading kubeconfig: %w", err)
		}
		for user, auth := range cfg.AuthInfos {
			owner := fmt.Sprintf(" of user %s in %s", user, filepath.Base(path))
			if auth.Token != "" {
				needles = append(needles, Needle{What: "the bearer token" + owner, Text: window(auth.Token)})
			}
			if len(auth.ClientKeyData) > 0 {
				keyNeedles, err := pemNeedles("the client key"+owner, auth.ClientKeyData)
				if err != nil {
					return nil, err
				}
				needles = append(needles, keyNeedles...)
			}
		}
	}
	if len(needles) == 0 {
		return nil, fmt.Errorf("no credential in the kubeconfigs of %s", dir)
	}
	return needles, nil
}

// KeyFileNeedles returns the private keys of the *.key files in dir.
func KeyFileNeedles(dir string) ([]Needle, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.key"))
	if err != nil {
		return nil, err
	}
	var needles []Needle
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		n, err := pemNeedles("the private key "+filepath.Base(path), raw)
		if err != nil {
			return nil, err
		}
		needles = append(needles, n...)
	}
	return needles, nil
}

// pemNeedles returns the forms a PEM-encoded key takes when printed: its body (base64 of
// the DER, as in the PEM) and the base64 of the whole PEM (as kubeconfigs hold it).
func pemNeedles(what string, raw []byte) ([]Needle, error) {
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("%s is not PEM", what)
	}
	return []Needle{
		{What: what + " (PEM body)", Text: bodyWindow(base64.StdEncoding.EncodeToString(block.Bytes))},
		{What: what + " (base64 of the PEM)", Text: window(base64.StdEncoding.EncodeToString(raw))},
	}, nil
}

// pemLineLength is the length of a PEM body's lines.
const pemLineLength = 64

// bodyWindow returns the start of a PEM body's second line: within one line of the key
// whether it is printed as PEM, with its line breaks, or joined.
func bodyWindow(body string) string {
	if len(body) < pemLineLength+windowLength {
		return window(body)
	}
	return body[pemLineLength : pemLineLength+windowLength]
}

// window returns the middle of a credential: the start of an encoded key is its format's
// header, the same for every key.
func window(s string) string {
	if len(s) <= windowLength {
		return s
	}
	start := (len(s) - windowLength) / 2
	return s[start : start+windowLength]
}
