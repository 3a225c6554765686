package main

// A site's PKI, made the first time a site starts and kept in its folder afterwards: one CA per
// site (as each K3s server makes its own, k3s pkg/daemon/control/deps), a serving certificate
// for 127.0.0.1 and the in-cluster names, the admin's client certificate (group system:masters,
// as K3s's admin.kubeconfig), the service-account signing key and a front-proxy CA for the
// aggregation layer. Keys are ECDSA P-256 in PKCS#8, which both Go and rustls read.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

var serverAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}

// loadPair reads name.crt and name.key from dir.
func loadPair(dir, name string) (keyPair, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return keyPair{}, err
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return keyPair{}, fmt.Errorf("%s.key is no signing key", name)
	}
	return keyPair{cert, signer}, nil
}

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

type certSpec struct {
	commonName string
	orgs       []string
	dns        []string
	ips        []net.IP
	usage      []x509.ExtKeyUsage
}

// ensurePKI writes (serving the API at `addresses` too) the site's certificates under dir/pki unless they are there already.
func ensurePKI(dir, site string, addresses []net.IP) error {
	final := filepath.Join(dir, "pki")
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	// Made whole in a scratch folder and renamed: a site stopped half-way makes it anew.
	pki := final + ".new"
	_ = os.RemoveAll(pki)
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	ca, err := newCA(site + "-ca")
	if err != nil {
		return err
	}
	proxyCA, err := newCA(site + "-front-proxy-ca")
	if err != nil {
		return err
	}
	serving := certSpec{
		commonName: "kube-apiserver",
		dns:        []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips:        append([]net.IP{net.ParseIP("127.0.0.1")}, addresses...),
		usage:      []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	admin := certSpec{commonName: "system:admin", orgs: []string{"system:masters"}, usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	proxyClient := certSpec{commonName: "system:auth-proxy", usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range []struct {
		name   string
		issuer keyPair
		spec   certSpec
	}{{"serving", ca, serving}, {"admin", ca, admin}, {"front-proxy-client", proxyCA, proxyClient}} {
		kp, err := issue(c.issuer, c.spec)
		if err != nil {
			return err
		}
		if err := writePair(pki, c.name, kp); err != nil {
			return err
		}
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(pki, "service-account.key"), sa); err != nil {
		return err
	}
	// The API server reads the verifying key as a public key, not from the private one.
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pki, "service-account.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return err
	}
	if err := writePair(pki, "front-proxy-ca", proxyCA); err != nil {
		return err
	}
	if err := writePair(pki, "ca", ca); err != nil {
		return err
	}
	return os.Rename(pki, final)
}

func newCA(name string) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	return keyPair{cert, key}, err
}

func issue(ca keyPair, s certSpec) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: s.commonName, Organization: s.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  s.usage,
		DNSNames:     s.dns,
		IPAddresses:  s.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	return keyPair{cert, key}, err
}

func writePair(dir, name string, kp keyPair) error {
	if err := writeKey(filepath.Join(dir, name+".key"), kp.key); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw}), 0o644)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}
