package directory

// owner picks the directory owner of a client id among nodes by rendezvous
// (highest random weight) hashing: each node's weight is a hash of the
// client id and the node id, and the heaviest node wins. Every node that
// sees the same member list picks the same owner, and when a node joins or
// leaves only the client ids it wins or held move.
func owner(clientID string, nodes []string) string {
	best, bestW := "", uint64(0)
	for _, n := range nodes {
		w := weight(clientID, n)
		if best == "" || w > bestW || (w == bestW && n < best) {
			best, bestW = n, w
		}
	}
	return best
}

// weight is FNV-1a over the client id, a separator and the node id,
// finished with a 64-bit mixer so that similar ids spread well.
func weight(clientID, node string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(clientID); i++ {
		h ^= uint64(clientID[i])
		h *= prime
	}
	h ^= 0xff
	h *= prime
	for i := 0; i < len(node); i++ {
		h ^= uint64(node[i])
		h *= prime
	}
	// splitmix64 finaliser
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
