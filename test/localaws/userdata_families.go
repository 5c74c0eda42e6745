package localaws

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
)

// bottlerocketSettings is the part of Bottlerocket's settings TOML the simulated kubelet reads.
type bottlerocketSettings struct {
	Settings struct {
		Kubernetes struct {
			NodeLabels     map[string]string   `toml:"node-labels"`
			NodeTaints     map[string][]string `toml:"node-taints"`
			MaxPods        *int32              `toml:"max-pods"`
			KubeReserved   map[string]string   `toml:"kube-reserved"`
			SystemReserved map[string]string   `toml:"system-reserved"`
			EvictionHard   map[string]string   `toml:"eviction-hard"`
		} `toml:"kubernetes"`
		BootstrapCommands map[string]struct {
			Commands [][]string `toml:"commands"`
		} `toml:"bootstrap-commands"`
	} `toml:"settings"`
}

// parseBottlerocket reads Bottlerocket settings TOML. ok is false when the user data is not
// TOML with [settings.kubernetes], so that another format may be tried.
func parseBottlerocket(raw []byte) (settings kubeletSettings, ok bool, err error) {
	var doc bottlerocketSettings
	md, err := toml.Decode(string(raw), &doc)
	if err != nil || !md.IsDefined("settings", "kubernetes") {
		return kubeletSettings{}, false, nil
	}
	k := doc.Settings.Kubernetes
	cfg := kubeletConfig{MaxPods: k.MaxPods, KubeReserved: k.KubeReserved, SystemReserved: k.SystemReserved, EvictionHard: k.EvictionHard}
	settings, err = settingsFrom(cfg, nil)
	if err != nil {
		return kubeletSettings{}, true, fmt.Errorf("reading Bottlerocket settings: %w", err)
	}
	for key, v := range k.NodeLabels {
		settings.labels[key] = v
	}
	for key, values := range k.NodeTaints {
		for _, v := range values {
			value, effect, _ := strings.Cut(v, ":")
			spec := key + ":" + effect
			if value != "" {
				spec = key + "=" + value + ":" + effect
			}
			t, err := parseTaint(spec)
			if err != nil {
				return kubeletSettings{}, true, fmt.Errorf("reading Bottlerocket node-taints: %w", err)
			}
			settings.taints = append(settings.taints, t)
		}
	}
	sortTaints(settings.taints)
	// Bottlerocket computes kube-reserved per resource it is not given.
	settings.defaultKubeReserved = true
	for _, c := range doc.Settings.BootstrapCommands {
		for _, cmd := range c.Commands {
			if strings.Join(cmd, " ") == "apiclient ephemeral-storage init" {
				settings.raid0 = true
			}
		}
	}
	return settings, true, nil
}

// sortTaints orders taints by key and value, as TOML tables have no order.
func sortTaints(taints []corev1.Taint) {
	for i := 1; i < len(taints); i++ {
		for j := i; j > 0 && taints[j].Key+"="+taints[j].Value < taints[j-1].Key+"="+taints[j-1].Value; j-- {
			taints[j], taints[j-1] = taints[j-1], taints[j]
		}
	}
}

// eksBootstrapScript is the AL2 AMI's bootstrap script.
const eksBootstrapScript = "/etc/eks/bootstrap.sh"

// parseEKSBootstrap reads the arguments of the AL2 AMI's /etc/eks/bootstrap.sh from a shell
// script, alone or in a MIME multipart document. ok is false when no script calls it.
func parseEKSBootstrap(raw []byte) (settings kubeletSettings, ok bool, err error) {
	var call string
	for _, script := range shellScripts(raw) {
		if c := bootstrapCall(script); c != "" {
			call = c
		}
	}
	if call == "" {
		return kubeletSettings{}, false, nil
	}
	words, err := shellWords(call)
	if err != nil {
		return kubeletSettings{}, true, fmt.Errorf("reading %s arguments: %w", eksBootstrapScript, err)
	}
	var flags []string
	useMaxPods := true
	raid0 := false
	for i := 0; i < len(words); i++ {
		if i+1 >= len(words) {
			break
		}
		switch words[i] {
		case "--kubelet-extra-args":
			flags = append(flags, strings.Fields(words[i+1])...)
			i++
		case "--use-max-pods":
			useMaxPods = words[i+1] != "false"
			i++
		case "--local-disks":
			raid0 = words[i+1] == "raid0"
			i++
		}
	}
	settings, err = settingsFrom(kubeletConfig{}, flags)
	if err != nil {
		return kubeletSettings{}, true, fmt.Errorf("reading %s --kubelet-extra-args: %w", eksBootstrapScript, err)
	}
	if useMaxPods && settings.maxPods != nil {
		return kubeletSettings{}, true, fmt.Errorf("reading %s: --max-pods in --kubelet-extra-args needs --use-max-pods false", eksBootstrapScript)
	}
	// bootstrap.sh writes the EKS kube-reserved into the kubelet's configuration; a
	// --kube-reserved flag replaces the whole of it.
	settings.defaultKubeReserved = len(settings.kubeReserved) == 0
	settings.raid0 = raid0
	return settings, true, nil
}

// shellScripts returns the shell script parts of a MIME multipart document, or the whole.
func shellScripts(raw []byte) []string {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return []string{string(raw)}
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return []string{string(raw)}
	}
	var scripts []string
	reader := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := reader.NextPart()
		if errors.Is(err, io.EOF) || err != nil {
			return scripts
		}
		partType, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if partType != "text/x-shellscript" {
			continue
		}
		body, err := io.ReadAll(part)
		if err == nil {
			scripts = append(scripts, string(body))
		}
	}
}

// bootstrapCall returns the arguments of the script's bootstrap.sh command, its continuation
// lines joined.
func bootstrapCall(script string) string {
	lines := strings.Split(script, "\n")
	for i, line := range lines {
		_, args, found := strings.Cut(line, eksBootstrapScript)
		if !found {
			continue
		}
		for strings.HasSuffix(strings.TrimRight(args, " \r"), `\`) && i+1 < len(lines) {
			args = strings.TrimSuffix(strings.TrimRight(args, " \r"), `\`) + " " + lines[i+1]
			i++
		}
		return args
	}
	return ""
}

// shellWords splits a command line the way bash does for single- and double-quoted words.
func shellWords(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			word.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			end := strings.IndexByte(line[i+1:], '"')
			if end < 0 {
				return nil, errors.New("unterminated double quote")
			}
			word.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '\\' && i+1 < len(line):
			word.WriteByte(line[i+1])
			i++
			inWord = true
		case c == ' ' || c == '\t' || c == '\r':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// windowsBootstrapScript is the Windows AMI's bootstrap script, which EC2Launch runs from
// the <powershell> block of the user data.
const windowsBootstrapScript = "Start-EKSBootstrap.ps1"

// parseWindowsBootstrap reads the arguments of the Windows AMI's Start-EKSBootstrap.ps1 from
// PowerShell user data: the call is the command line that passes -EKSClusterName, directly
// or through a variable holding the script's path. ok is false when the user data is not a
// <powershell> block that calls the bootstrap.
func parseWindowsBootstrap(raw []byte) (settings kubeletSettings, ok bool, err error) {
	text := string(raw)
	start := strings.Index(text, "<powershell>")
	end := strings.LastIndex(text, "</powershell>")
	if start < 0 || end < start || !strings.Contains(text, windowsBootstrapScript) {
		return kubeletSettings{}, false, nil
	}
	var call string
	for _, line := range strings.Split(text[start+len("<powershell>"):end], "\n") {
		if strings.Contains(line, "-EKSClusterName") {
			call = line
		}
	}
	if call == "" {
		return kubeletSettings{}, false, nil
	}
	words, err := powershellWords(call)
	if err != nil {
		return kubeletSettings{}, true, fmt.Errorf("reading %s arguments: %w", windowsBootstrapScript, err)
	}
	var flags []string
	for i := 0; i+1 < len(words); i++ {
		if strings.EqualFold(words[i], "-KubeletExtraArgs") {
			flags = append(flags, strings.Fields(words[i+1])...)
			i++
		}
	}
	settings, err = settingsFrom(kubeletConfig{}, flags)
	if err != nil {
		return kubeletSettings{}, true, fmt.Errorf("reading %s -KubeletExtraArgs: %w", windowsBootstrapScript, err)
	}
	// The bootstrap writes the EKS kube-reserved into the kubelet's configuration, as AL2's
	// does; a --kube-reserved flag replaces the whole of it.
	settings.defaultKubeReserved = len(settings.kubeReserved) == 0
	return settings, true, nil
}

// powershellWords splits a PowerShell command line into words: single-quoted strings (a
// quote written twice is one quote), double-quoted strings without expansion, and bare words.
func powershellWords(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch c {
		case '\'':
			for i++; ; i++ {
				if i >= len(line) {
					return nil, errors.New("unterminated single quote")
				}
				if line[i] == '\'' {
					if i+1 < len(line) && line[i+1] == '\'' {
						word.WriteByte('\'')
						i++
						continue
					}
					break
				}
				word.WriteByte(line[i])
			}
			inWord = true
		case '"':
			end := strings.IndexByte(line[i+1:], '"')
			if end < 0 {
				return nil, errors.New("unterminated double quote")
			}
			word.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case ' ', '\t', '\r':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}
