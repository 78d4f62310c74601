package auth

import (
	"sync"

	"github.com/sextantmq/sextant/internal/topic"
)

// maxCached bounds a Grant's decision cache; past it the cache starts over.
const maxCached = 256

// Decision bits kept per topic in a Grant's cache.
const (
	pubKnown uint8 = 1 << iota
	pubAllowed
	readKnown
	readAllowed
)

// Grant is one client's rights: the ACL's rules for its identity, with %u
// and %c filled in. It is safe for concurrent use.
type Grant struct {
	user, clientID string
	anonymous      bool
	src            *Authenticator // nil: fixed to the ACL it was made from

	mu struct {
		sync.Mutex
		acl   *ACL
		rules []compiled
		cache map[string]uint8
	}
}

// Grant returns the rights of a client with identity user (ignored when
// anonymous) and client identifier clientID under a, fixed: it does not
// follow reloads (see Authenticator.Grant for one that does).
func (a *ACL) Grant(user, clientID string, anonymous bool) *Grant {
	g := &Grant{user: user, clientID: clientID, anonymous: anonymous}
	g.setACLLocked(a)
	return g
}

func (g *Grant) setACLLocked(a *ACL) {
	g.mu.acl = a
	g.mu.rules = compile(a.Rules(g.user, g.anonymous), g.user, g.clientID)
	g.mu.cache = nil
}

// refreshLocked recompiles the rules if the authenticator's ACL was reloaded.
func (g *Grant) refreshLocked() {
	if g.src == nil {
		return
	}
	if cur := g.src.acl.Load(); cur != nil && cur != g.mu.acl {
		g.setACLLocked(cur)
	}
}

// User is the user name the grant was made for ("" when anonymous).
func (g *Grant) User() string { return g.user }

// CanPublish reports whether the client may publish to the topic name.
func (g *Grant) CanPublish(name string) bool {
	return g.decideName(name, pubKnown, pubAllowed, Publish)
}

// CanReceive reports whether a message on the topic name may be delivered
// to the client (subscribe access to the name).
func (g *Grant) CanReceive(name string) bool {
	return g.decideName(name, readKnown, readAllowed, Subscribe)
}

func (g *Grant) decideName(name string, known, allowed uint8, acc Access) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refreshLocked()
	bits := g.mu.cache[name]
	if bits&known != 0 {
		return bits&allowed != 0
	}
	ok := decideName(g.mu.rules, acc, name)
	bits |= known
	if ok {
		bits |= allowed
	}
	if g.mu.cache == nil || len(g.mu.cache) >= maxCached {
		g.mu.cache = make(map[string]uint8, 16)
	}
	g.mu.cache[name] = bits
	return ok
}

// CanSubscribe reports whether the client may subscribe to filter. A shared
// subscription is checked by its inner filter.
func (g *Grant) CanSubscribe(filter string) bool {
	_, inner, _, err := topic.ParseShared(filter)
	if err != nil || inner == "" {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refreshLocked()
	return decideFilter(g.mu.rules, inner)
}
