package sqlsim

import (
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

// tlsState is the instance's certificate (Config.TLS). Like SQL Server
// without a provisioned certificate, the instance generates a self-signed
// one when it is created; it names 127.0.0.1, ::1, localhost and the server
// name, so a client that trusts it (the "certificate" DSN parameter) also
// verifies the host name.
type tlsState struct {
	cfg      *tls.Config
	certPEM  []byte
	certFile string // certPEM on disk, for a client's "certificate" parameter
}

func (in *Instance) initTLS() error {
	if in.cfg.TLS == "" {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("sqlsim: TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return fmt.Errorf("sqlsim: TLS serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: in.cfg.Name, Organization: []string{"backupcycle sqlsim"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // self-signed: it is its own CA file
		DNSNames:              []string{"localhost", in.cfg.Name},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("sqlsim: TLS certificate: %w", err)
	}
	in.tls = &tlsState{
		cfg: &tls.Config{
			Certificates:           []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
			MinVersion:             tls.VersionTLS12,
			SessionTicketsDisabled: true,
		},
		certPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		certFile: filepath.Join(in.cfg.DataDir, "sqlsim-cert.pem"),
	}
	if err := os.WriteFile(in.tls.certFile, in.tls.certPEM, 0o644); err != nil {
		return fmt.Errorf("sqlsim: write the TLS certificate: %w", err)
	}
	return nil
}

// CertificatePEM is the certificate the instance presents when Config.TLS
// is "on" or "strict" (PEM), e.g. for a client's CA file; nil when TLS is
// off.
func (in *Instance) CertificatePEM() []byte {
	if in.tls == nil {
		return nil
	}
	return append([]byte(nil), in.tls.certPEM...)
}
