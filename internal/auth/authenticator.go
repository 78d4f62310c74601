package auth

import (
	"crypto/x509"
	"fmt"
	"runtime"
	"sync/atomic"
)

// CertField says which part of a verified client certificate names the
// client.
type CertField uint8

// CertField values.
const (
	CertNone CertField = iota // certificates do not identify clients
	CertCN                    // the subject's common name
	CertSAN                   // the first DNS name, else e-mail address, else URI of the subject alternative names
)

// ParseCertField parses "none", "cn" or "san".
func ParseCertField(s string) (CertField, error) {
	switch s {
	case "", "none":
		return CertNone, nil
	case "cn":
		return CertCN, nil
	case "san":
		return CertSAN, nil
	}
	return CertNone, fmt.Errorf("auth: certificate identity %q is not none, cn or san", s)
}

// CertIdentity returns the identity field names in cert, or "" if it has none.
func CertIdentity(cert *x509.Certificate, field CertField) string {
	if cert == nil {
		return ""
	}
	switch field {
	case CertCN:
		return cert.Subject.CommonName
	case CertSAN:
		switch {
		case len(cert.DNSNames) > 0:
			return cert.DNSNames[0]
		case len(cert.EmailAddresses) > 0:
			return cert.EmailAddresses[0]
		case len(cert.URIs) > 0:
			return cert.URIs[0].String()
		}
	}
	return ""
}

// Config is what an Authenticator is told at start; it does not change on
// Reload.
type Config struct {
	AllowAnonymous bool
	CertIdentity   CertField
	// MaxConcurrentHashes bounds the bcrypt comparisons running at once
	// (each costs tens of milliseconds of CPU); 0 means GOMAXPROCS.
	MaxConcurrentHashes int
}

// Credentials are what a connecting client presents.
type Credentials struct {
	ClientID    string
	Username    string
	HasUsername bool
	Password    []byte
	HasPassword bool
	Cert        *x509.Certificate // the verified client certificate, nil without one
}

// Method says how a client was identified.
type Method string

// Method values.
const (
	MethodAnonymous   Method = "anonymous"
	MethodPassword    Method = "password"
	MethodCertificate Method = "certificate"
)

// Identity is who a client authenticated as.
type Identity struct {
	User   string // "" when anonymous
	Method Method
}

// Anonymous reports whether the client has no user name.
func (id Identity) Anonymous() bool { return id.Method == MethodAnonymous }

// Authenticator decides who connecting clients are, and makes their Grants.
// The password file and ACL can be replaced at run time (Reload); Grants
// already made follow the new ACL.
type Authenticator struct {
	cfg Config
	sem chan struct{}

	passwords atomic.Pointer[Passwords] // nil: no password file
	acl       atomic.Pointer[ACL]       // nil: no access control
}

// NewAuthenticator returns an authenticator; pw and acl may be nil (no
// password file, no access control).
func NewAuthenticator(cfg Config, pw *Passwords, acl *ACL) *Authenticator {
	n := cfg.MaxConcurrentHashes
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	a := &Authenticator{cfg: cfg, sem: make(chan struct{}, n)}
	a.Reload(pw, acl)
	return a
}

// Reload replaces the password file and the ACL (nil: none).
func (a *Authenticator) Reload(pw *Passwords, acl *ACL) {
	a.passwords.Store(pw)
	a.acl.Store(acl)
}

// HasACL reports whether access control is configured.
func (a *Authenticator) HasACL() bool { return a.acl.Load() != nil }

// Authenticate decides who the client is:
//
//  1. With certificate identities on and a verified certificate carrying
//     the configured field, the client is that user. A user name in
//     CONNECT, if any, must equal it; the password is not checked.
//  2. Otherwise a client with a user name, on a node with a password file,
//     is that user if the password verifies (ErrBadCredentials if not).
//  3. Otherwise (no user name, or no password file to check one against)
//     the client is anonymous, if anonymous access is on (ErrNotAuthorized
//     if not).
func (a *Authenticator) Authenticate(cr Credentials) (Identity, error) {
	if a.cfg.CertIdentity != CertNone {
		if id := CertIdentity(cr.Cert, a.cfg.CertIdentity); id != "" {
			if cr.HasUsername && cr.Username != id {
				return Identity{}, fmt.Errorf("%w: user name %q does not match the client certificate", ErrBadCredentials, cr.Username)
			}
			return Identity{User: id, Method: MethodCertificate}, nil
		}
	}
	if pw := a.passwords.Load(); pw != nil && cr.HasUsername {
		if !cr.HasPassword {
			return Identity{}, fmt.Errorf("%w: no password", ErrBadCredentials)
		}
		a.sem <- struct{}{}
		err := pw.Verify(cr.Username, cr.Password)
		<-a.sem
		if err != nil {
			return Identity{}, err
		}
		return Identity{User: cr.Username, Method: MethodPassword}, nil
	}
	if !a.cfg.AllowAnonymous {
		return Identity{}, ErrNotAuthorized
	}
	return Identity{Method: MethodAnonymous}, nil
}

// Grant returns the rights of an authenticated client, following ACL
// reloads, or nil when no ACL is configured.
func (a *Authenticator) Grant(id Identity, clientID string) *Grant {
	acl := a.acl.Load()
	if acl == nil {
		return nil
	}
	g := &Grant{user: id.User, clientID: clientID, anonymous: id.Anonymous(), src: a}
	g.mu.Lock()
	g.setACLLocked(acl)
	g.mu.Unlock()
	return g
}
