// Package auth owns who a client is and what it may do: the password file
// (user names with bcrypt hashes), the access control list (allow and deny
// rules per user, for every authenticated user and for anonymous clients,
// checked in order, first match wins, deny when nothing matches),
// identities taken from verified client certificates, and Grants: one
// client's compiled rules answering "may it publish to this topic, subscribe
// to this filter, receive this message".
//
// It does no network I/O and reads no file other than those handed to
// LoadPasswords and LoadACL. Passwords and ACL values are immutable once
// parsed; an Authenticator swaps them atomically on Reload, and the Grants
// it made follow the new ACL on their next check. A Grant is safe for
// concurrent use: it keeps a small cache of decisions per topic under its
// own mutex.
//
// It must not import the session, broker or listener packages: the node
// wires it into the session's Authenticator interface.
package auth
