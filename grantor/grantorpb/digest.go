package grantorpb

// LeaseSetDigest is the digest of a set of grants that a keepalive's
// SessionRenewal.lease_set_version carries and SessionRenewed states: the
// sum, modulo 2^64, of TokenDigest of each grant's token; 0 for none.
// Tokens are unique, so the digests of two different sets differ but for
// a 64-bit collision. Grantors and sidecars compute it alike.
func LeaseSetDigest(tokens []uint64) uint64 {
	var d uint64
	for _, t := range tokens {
		d += TokenDigest(t)
	}
	return d
}

// TokenDigest mixes a token into 64 well-spread bits (the splitmix64
// finalizer), so that sums over different sets of tokens differ.
func TokenDigest(token uint64) uint64 {
	z := token + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
