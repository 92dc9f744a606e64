package grantorpb

import "testing"

// The digest is part of the contract: these values must never change.
func TestLeaseSetDigestIsStable(t *testing.T) {
	if got := LeaseSetDigest(nil); got != 0 {
		t.Fatalf("empty set: %#x", got)
	}
	if got, want := TokenDigest(1), uint64(0x910a2dec89025cc1); got != want {
		t.Fatalf("TokenDigest(1) = %#x, want %#x", got, want)
	}
	if LeaseSetDigest([]uint64{1, 2, 3}) != LeaseSetDigest([]uint64{3, 1, 2}) {
		t.Fatal("the digest depends on order")
	}
	if LeaseSetDigest([]uint64{1, 2}) == LeaseSetDigest([]uint64{1, 3}) || LeaseSetDigest([]uint64{1}) == LeaseSetDigest([]uint64{1, 1}) {
		t.Fatal("different sets with one digest")
	}
}
