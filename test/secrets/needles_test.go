package secrets

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestKubeconfigCredentialsAreFound writes a kubeconfig with a client key and a token, and
// checks that each form the key takes when printed is found in a log, and the token too.
func TestKubeconfigCredentialsAreFound(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	const token = "eyJhbGciOiJSUzI1NiIsImtpZCI6InRhaWxvciJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl"
	cfg := clientcmdapi.NewConfig()
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{ClientKeyData: keyPEM, Token: token}
	if err := clientcmd.WriteToFile(*cfg, filepath.Join(dir, "sa.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	needles, err := KubeconfigNeedles(dir)
	if err != nil {
		t.Fatal(err)
	}
	needles = append(needles, Patterns...)
	pemLines := strings.Split(strings.TrimSpace(string(keyPEM)), "\n")
	tests := []struct {
		name string
		log  string
		want []string
	}{
		{name: "the PEM, line by line", log: "I1127 key\n" + strings.Join(pemLines, "\n"), want: []string{"a PEM block", "the client key of user sa in sa.kubeconfig (PEM body)"}},
		{name: "the PEM body joined", log: "I1127 key " + strings.Join(pemLines[1:len(pemLines)-1], ""), want: []string{"the client key of user sa in sa.kubeconfig (PEM body)"}},
		{name: "the base64 of the PEM, as a kubeconfig holds it", log: "I1127 client-key-data: " + base64.StdEncoding.EncodeToString(keyPEM), want: []string{"the client key of user sa in sa.kubeconfig (base64 of the PEM)"}},
		{name: "the token", log: "I1127 token=" + token, want: []string{"the bearer token of user sa in sa.kubeconfig"}},
		{name: "nothing", log: "I1127 GET /api/v1/pods 200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found, err := Scan("c.log", strings.NewReader(tt.log), needles)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range found {
				got = append(got, f.What)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}
