package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/sextantmq/sextant/internal/auth"
	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/listener"
	"github.com/sextantmq/sextant/internal/logging"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/topic"
)

// security is the node's TLS certificates, authenticator, per-address
// limiter and admin API tokens: what `sextant serve` is told on start, and
// the files Reload reads again.
type security struct {
	cfg     config.Config
	log     *slog.Logger
	certs   *listener.Certificates // nil: no TLS listener
	auth    *auth.Authenticator    // nil: every client anonymous, no access control
	limiter *listener.IPLimiter    // nil: no per-address limits

	// The admin API's tokens as last loaded; set by newSecurity and
	// reload, which the node does not run concurrently.
	adminToken, readToken string
}

// newSecurity loads every file the config names; an error names the file.
func newSecurity(cfg config.Config, clk clock.Clock, m *metrics.Node, log *slog.Logger) (*security, error) {
	s := &security{cfg: cfg, log: log}
	if cfg.TLSCert != "" {
		ca := tls.NoClientCert
		switch cfg.TLSClientAuth {
		case "request":
			ca = tls.VerifyClientCertIfGiven
		case "require":
			ca = tls.RequireAndVerifyClientCert
		}
		certs, err := listener.LoadCertificates(listener.TLSFiles{Cert: cfg.TLSCert, Key: cfg.TLSKey, CA: cfg.TLSCA, ClientAuth: ca}, clk)
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		s.certs = certs
	}
	anon := cfg.AnonymousAllowed()
	if !anon || cfg.PasswordFile != "" || cfg.ACLFile != "" || cfg.TLSIdentity != "none" {
		pw, acl, err := s.loadAuthFiles()
		if err != nil {
			return nil, err
		}
		field, err := auth.ParseCertField(cfg.TLSIdentity)
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		s.auth = auth.NewAuthenticator(auth.Config{AllowAnonymous: anon, CertIdentity: field}, pw, acl)
	}
	var err error
	if s.adminToken, s.readToken, err = s.adminTokens(); err != nil {
		return nil, err
	}
	if cfg.MaxConnsPerIP > 0 || cfg.ConnectRatePerIP > 0 {
		s.limiter = listener.NewIPLimiter(listener.IPLimits{MaxConns: cfg.MaxConnsPerIP, ConnectRate: cfg.ConnectRatePerIP, Loopback: cfg.LimitLoopback}, clk,
			func(limit string) { m.LimitsHit.WithLabelValues(limit).Inc() })
	}
	// Warn only once everything loaded: a node that does not start has
	// nothing to warn about.
	if anon {
		if cfg.AllowAnonymous == "auto" {
			log.Warn("anonymous clients are allowed: every client listener is on loopback (allow-anonymous: auto); " +
				"set password-file or allow-anonymous: false before exposing the node")
		} else {
			for _, a := range cfg.ClientListeners() {
				if !config.IsLoopback(a) {
					log.Warn("anonymous clients are allowed on a listener that is not on loopback", "addr", a)
					break
				}
			}
		}
	}
	return s, nil
}

func (s *security) loadAuthFiles() (*auth.Passwords, *auth.ACL, error) {
	var pw *auth.Passwords
	var acl *auth.ACL
	var err error
	if f := s.cfg.PasswordFile; f != "" {
		if pw, err = auth.LoadPasswords(f); err != nil {
			return nil, nil, fmt.Errorf("node: %w", err)
		}
	}
	if f := s.cfg.ACLFile; f != "" {
		if acl, err = auth.LoadACL(f); err != nil {
			return nil, nil, fmt.Errorf("node: %w", err)
		}
	}
	return pw, acl, nil
}

// adminTokens returns the admin API's tokens, reading admin-token-file.
func (s *security) adminTokens() (admin, read string, err error) {
	admin, read = s.cfg.AdminToken, s.cfg.AdminReadToken
	if f := s.cfg.AdminTokenFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", "", fmt.Errorf("node: admin-token-file: %w", err)
		}
		admin = strings.TrimSpace(string(b))
		if len(admin) < 16 {
			return "", "", fmt.Errorf("node: admin-token-file %s: the token is shorter than 16 characters", f)
		}
		if admin == read {
			return "", "", fmt.Errorf("node: admin-token-file %s: the token equals admin-read-token", f)
		}
	}
	return admin, read, nil
}

// reload reads the certificates, password file, ACL and admin token file
// again; a file that fails to load leaves its predecessor in use.
func (s *security) reload() error {
	var errs []error
	if s.certs != nil {
		if err := s.certs.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("node: %w", err))
		}
	}
	if s.auth != nil {
		pw, acl, err := s.loadAuthFiles()
		if err != nil {
			errs = append(errs, err)
		} else {
			s.auth.Reload(pw, acl)
		}
	}
	if admin, read, err := s.adminTokens(); err != nil {
		errs = append(errs, err)
	} else {
		s.adminToken, s.readToken = admin, read
	}
	return errors.Join(errs...)
}

// Failed logins are logged at most loginLogBurst times a minute; the next
// line after a quiet minute says how many were left out.
const loginLogBurst = 10

// sessionAuth is the node's session.Authenticator: the authenticator's
// decision (a nil one lets every client in, anonymous), the ACL's rights,
// and without an ACL the $SYS/ access sys-access gives. Failed logins are
// logged, rate-limited.
type sessionAuth struct {
	a        *auth.Authenticator // nil: every client anonymous, no ACL
	sys      string              // sys-access: loopback, all or none
	log      *slog.Logger
	failures *logging.Repeats
}

var _ session.Authenticator = sessionAuth{}

func newSessionAuth(a *auth.Authenticator, cfg config.Config, clk clock.Clock, log *slog.Logger) sessionAuth {
	return sessionAuth{a: a, sys: cfg.SysAccess, log: log, failures: logging.NewRepeats(clk, time.Minute, loginLogBurst)}
}

func (sa sessionAuth) Authenticate(cr *session.Credentials) (session.Identity, packet.ReasonCode, string) {
	if sa.a == nil {
		return session.Identity{Rights: sa.withoutACL(cr.Remote)}, packet.Success, ""
	}
	id, err := sa.a.Authenticate(auth.Credentials{
		ClientID: cr.ClientID, Username: cr.Username, HasUsername: cr.HasUsername,
		Password: cr.Password, HasPassword: cr.HasPassword, Cert: cr.Cert,
	})
	if err != nil {
		code, reason := packet.BadUserNameOrPassword, "bad user name or password"
		if errors.Is(err, auth.ErrNotAuthorized) {
			code, reason = packet.NotAuthorized, "not authorized"
		}
		sa.logFailure(cr, code, err)
		return session.Identity{}, code, reason
	}
	if g := sa.a.Grant(id, cr.ClientID); g != nil {
		return session.Identity{User: id.User, Rights: g}, packet.Success, ""
	}
	return session.Identity{User: id.User, Rights: sa.withoutACL(cr.Remote)}, packet.Success, ""
}

func (sa sessionAuth) logFailure(cr *session.Credentials, code packet.ReasonCode, err error) {
	ok, suppressed := sa.failures.Allow("login")
	if !ok {
		return
	}
	remote := ""
	if cr.Remote != nil {
		remote = cr.Remote.String()
	}
	args := []any{"client", cr.ClientID, "user", cr.Username, "remote", remote, "code", code.String(), "err", err}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	sa.log.Warn("client failed to log in", args...)
}

func (sa sessionAuth) Unidentified(clientID string) session.Authorizer {
	if sa.a == nil {
		return nil
	}
	if g := sa.a.Grant(auth.Identity{Method: auth.MethodAnonymous}, clientID); g != nil {
		return g
	}
	return nil
}

// withoutACL returns the rights of a client when no ACL is configured:
// everything but $SYS/ (nil), or everything with $SYS/ readable where
// sys-access allows it.
func (sa sessionAuth) withoutACL(remote net.Addr) session.Authorizer {
	switch {
	case sa.sys == "all", sa.sys == "loopback" && remote != nil && isLoopback(remote):
		return sysReader{}
	}
	return nil
}

func isLoopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// sysReader is a client's rights without an ACL where $SYS/ is readable:
// it may subscribe to any filter, $SYS/ ones included, and receive what
// they match; it may publish to any topic but $SYS/ ones, which only the
// node writes.
type sysReader struct{}

var _ session.Authorizer = sysReader{}

func (sysReader) CanPublish(name string) bool { return !topic.IsSys(name) }

func (sysReader) CanSubscribe(filter string) bool {
	_, inner, _, err := topic.ParseShared(filter)
	return err == nil && inner != ""
}

func (sysReader) CanReceive(string) bool { return true }
