package gossip

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		meta    Meta
		leaving bool
	}{
		{name: "grantor leader", meta: grantorMeta(1, "g1")},
		{name: "grantor run", meta: Meta{Role: RoleGrantor, NodeID: "n", RPCAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", Instance: math.MaxUint64}},
		{name: "grantor non-voter, no leader", meta: Meta{Role: RoleGrantor, NodeID: "n", RPCAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2"}},
		{name: "sidecar leaving", meta: sidecarMeta(), leaving: true},
		{name: "unicode", meta: Meta{Role: RoleSidecar, Version: "v1.0-é✓"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := encodeMeta(tt.meta, tt.leaving)
			got, leaving, err := decodeMeta(b)
			if err != nil || got != tt.meta || leaving != tt.leaving {
				t.Errorf("decode(encode(%+v, %v)) = %+v, %v, %v", tt.meta, tt.leaving, got, leaving, err)
			}
		})
	}
}

func TestDecodeMeta(t *testing.T) {
	valid := encodeMeta(grantorMeta(1, "g1"), false)
	tests := []struct {
		name    string
		b       []byte
		wantErr error // nil = decodes to grantorMeta(1, "g1")
	}{
		{name: "valid", b: valid},
		{name: "later fields appended", b: append(bytes.Clone(valid), 3, 'n', 'e', 'w')},
		{name: "unknown flag bits", b: append([]byte{metaVersion1, valid[1] | 0x80}, valid[2:]...)},
		{name: "empty", b: nil, wantErr: ErrMetaMalformed},
		{name: "version only", b: []byte{metaVersion1}, wantErr: ErrMetaMalformed},
		{name: "without Instance (an older build)", b: valid[:len(valid)-1]},
		{name: "truncated", b: valid[:len(valid)-2], wantErr: ErrMetaMalformed},
		{name: "Instance truncated", b: append(valid[:len(valid)-1:len(valid)-1], 0x80), wantErr: ErrMetaMalformed},
		{name: "length past the end", b: []byte{metaVersion1, 0, 200, 'x'}, wantErr: ErrMetaMalformed},
		{name: "huge uvarint", b: []byte{metaVersion1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, wantErr: ErrMetaMalformed},
		{name: "version 2", b: append([]byte{2}, valid[1:]...), wantErr: ErrMetaVersion},
		{name: "version 0", b: append([]byte{0}, valid[1:]...), wantErr: ErrMetaVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := decodeMeta(tt.b)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != grantorMeta(1, "g1") {
				t.Errorf("= %+v, %v", got, err)
			}
		})
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(grantorMeta(1, "g1"), true))
	f.Add([]byte{metaVersion1, 0, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, leaving, err := decodeMeta(b)
		if err != nil {
			return
		}
		// Whatever decodes survives a re-encoding.
		m2, leaving2, err := decodeMeta(encodeMeta(m, leaving))
		if err != nil || m2 != m || leaving2 != leaving {
			t.Errorf("re-decode of %+v: %+v, %v", m, m2, err)
		}
	})
}

func TestMetaValidate(t *testing.T) {
	sizeOf := func(m Meta) int {
		m.Instance = math.MaxUint64 // the longest Start can draw
		return len(encodeMeta(m, true))
	}
	fits := grantorMeta(1, "g1")
	for sizeOf(fits) < memberlist.MetaMaxSize {
		fits.Version += "v"
	}
	over := fits
	over.Version += "v"
	tests := []struct {
		name    string
		meta    Meta
		wantErr string // "" = valid
	}{
		{name: "grantor", meta: grantorMeta(1, "")},
		{name: "sidecar", meta: sidecarMeta()},
		{name: "exactly 512 bytes", meta: fits},
		{name: "513 bytes", meta: over, wantErr: "more than memberlist's limit of 512"},
		{name: "no role", meta: Meta{}, wantErr: "role"},
		{name: "unknown role", meta: Meta{Role: "witness"}, wantErr: "role"},
		{name: "grantor without NodeID", meta: Meta{Role: RoleGrantor, RPCAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2"}, wantErr: "NodeID"},
		{name: "grantor without RPCAddr", meta: Meta{Role: RoleGrantor, NodeID: "n", RaftAddr: "127.0.0.1:2"}, wantErr: "RPCAddr"},
		{name: "grantor bad RaftAddr", meta: Meta{Role: RoleGrantor, NodeID: "n", RPCAddr: "127.0.0.1:1", RaftAddr: "nowhere"}, wantErr: "RaftAddr"},
		{name: "sidecar claims a leader", meta: Meta{Role: RoleSidecar, LeaderID: "g1"}, wantErr: "for grantors"},
		{name: "sidecar voter", meta: Meta{Role: RoleSidecar, Voter: true}, wantErr: "for grantors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.meta.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate() = %v, want an error about %q", err, tt.wantErr)
			}
		})
	}
	if err := over.Validate(); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("oversized meta: %v, want ErrMetaTooLarge", err)
	}
	if sizeOf(fits) != memberlist.MetaMaxSize {
		t.Errorf("test setup: fits is %d bytes", sizeOf(fits))
	}
}
