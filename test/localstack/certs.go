package localstack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// identity is a client of the API server and the certificate it authenticates with.
// RBAC treats a certificate whose common name is system:serviceaccount:<ns>:<name> as that
// ServiceAccount, so the stack runs Tailor under the RBAC manifests users install.
type identity struct {
	name   string
	user   string
	groups []string
}

var identities = []identity{
	{name: "admin", user: "tailor-admin", groups: []string{"system:masters"}},
	{name: "kube-controller-manager", user: "system:kube-controller-manager"},
	{name: "kube-scheduler", user: "system:kube-scheduler"},
	{name: "tailor-scheduler", user: "system:serviceaccount:tailor:tailor-scheduler"},
	{name: "tailor-provisioner", user: "system:serviceaccount:tailor:tailor-provisioner"},
	// The local AWS endpoint plays the kubelets and the cloud controller of its instances.
	{name: "local-aws", user: "tailor-local-aws", groups: []string{"system:masters"}},
	{name: "kwok", user: "tailor-kwok", groups: []string{"system:masters"}},
}

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func newAuthority() (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tailor-local-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue signs a certificate for a server (with IPs and names) or a client (user, groups).
func (a *authority) issue(cn string, groups []string, ips []net.IP, names []string, server bool) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, fmt.Errorf("generating key for %s: %w", cn, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	usage := x509.ExtKeyUsageClientAuth
	if server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     names,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating certificate for %s: %w", cn, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writePKI writes the CA, the API server's serving certificate, the service account signing
// key and a kubeconfig per identity into dir/pki and dir/kubeconfig.
func writePKI(dir, server string) error {
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	ca, err := newAuthority()
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.crt": ca.pem}
	crt, key, err := ca.issue("kube-apiserver", nil,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, true)
	if err != nil {
		return err
	}
	files["apiserver.crt"], files["apiserver.key"] = crt, key
	saKey, err := newKey()
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	files["sa.key"] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER})
	files["sa.pub"] = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(pki, name), data, 0o600); err != nil {
			return err
		}
	}
	for _, id := range identities {
		crt, key, err := ca.issue(id.user, id.groups, nil, nil, false)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(kubeconfigPath(dir, id.name), server, ca.pem, crt, key); err != nil {
			return err
		}
	}
	return nil
}

func kubeconfigPath(dir, name string) string {
	return filepath.Join(dir, "kubeconfig", name+".kubeconfig")
}

func writeKubeconfig(path, server string, ca, crt, key []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["tailor-local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	cfg.CurrentContext = "tailor-local"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
