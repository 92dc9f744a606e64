package gossip

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLoadKeyFile(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name    string
		content string // "" with noFile: the file does not exist
		noFile  bool
		wantLen []int  // for valid files: the keys' lengths
		wantErr string // "" = valid
	}{
		{name: "AES-256", content: b64(keyA), wantLen: []int{32}},
		{name: "AES-128 with newline", content: b64(keyA[:16]) + "\n", wantLen: []int{16}},
		{name: "AES-192 with spaces", content: "  " + b64(keyA[:24]) + " \n", wantLen: []int{24}},
		{name: "a keyring, first primary", content: "# rotation under way\n" + b64(keyA[:16]) + "\n\n" + b64(keyA) + "\n" + b64(keyA[:16]) + "\n", wantLen: []int{16, 32}},
		{name: "wrong length", content: b64(keyA[:20]), wantErr: "20 bytes; it must be 16, 24 or 32"},
		{name: "a bad second line", content: b64(keyA) + "\nnot*base64\n", wantErr: "line 2: not standard base64"},
		{name: "not base64", content: "not*base64!", wantErr: "not standard base64"},
		{name: "url-safe base64", content: base64.URLEncoding.EncodeToString([]byte{0xfb, 0xff, 0xfe, 0xfb, 0xff, 0xfe, 0xfb, 0xff, 0xfe, 0xfb, 0xff, 0xfe, 0xfb, 0xff, 0xfe, 0xfb}), wantErr: "not standard base64"},
		{name: "raw key, not encoded", content: string(keyA[:16]), wantErr: "12 bytes; it must be"},
		{name: "empty", content: "\n", wantErr: "holds no key"},
		{name: "missing file", noFile: true, wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gossip.key")
			if !tt.noFile {
				if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			keys, err := LoadKeyFile(path)
			if tt.wantErr == "" {
				var lens []int
				for _, k := range keys {
					lens = append(lens, len(k))
				}
				if err != nil || !slices.Equal(lens, tt.wantLen) {
					t.Errorf("LoadKeyFile = keys of %v bytes, %v; want %v", lens, err, tt.wantLen)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("LoadKeyFile = %v, want an error about %q", err, tt.wantErr)
			}
			if !tt.noFile && !errors.Is(err, ErrGossipKey) {
				t.Errorf("error %v does not wrap ErrGossipKey", err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ok := testConfig("x", sidecarMeta(), keyA)
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string // "" = valid
	}{
		{name: "test config", edit: func(*Config) {}},
		{name: "defaults", edit: func(c *Config) { *c = Config{Meta: sidecarMeta()} }},
		{name: "bind host not an IP", edit: func(c *Config) { c.BindAddr = "localhost:0" }, wantErr: "must be an IP"},
		{name: "bind without port", edit: func(c *Config) { c.BindAddr = "127.0.0.1" }, wantErr: "BindAddr"},
		{name: "bind port out of range", edit: func(c *Config) { c.BindAddr = "127.0.0.1:70000" }, wantErr: "bad port"},
		{name: "key of 10 bytes", edit: func(c *Config) { c.Keys = [][]byte{keyA[:10]} }, wantErr: "16, 24 or 32"},
		{name: "empty seed", edit: func(c *Config) { c.Join = []string{""} }, wantErr: "empty address"},
		{name: "probe timeout too long", edit: func(c *Config) { c.Timing.ProbeTimeout = c.Timing.ProbeInterval }, wantErr: "ProbeTimeout"},
		{name: "negative timing", edit: func(c *Config) { c.Timing.PushPullInterval = -time.Second }, wantErr: "negative"},
		{name: "no meta", edit: func(c *Config) { c.Meta = Meta{} }, wantErr: "role"},
		{name: "meta too large", edit: func(c *Config) { c.Meta.Version = strings.Repeat("v", 600) }, wantErr: "limit of 512"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			err := c.Validate()
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
}

func TestDefaults(t *testing.T) {
	c := Config{Meta: grantorMeta(1, "")}.withDefaults()
	if c.Name != "g1" || c.BindAddr != "0.0.0.0:7946" || c.Timing != LANTiming() {
		t.Errorf("grantor defaults: %+v", c)
	}
	a, b := Config{Meta: sidecarMeta()}.withDefaults(), Config{Meta: sidecarMeta()}.withDefaults()
	if a.Name == "" || a.Name == b.Name {
		t.Errorf("sidecar default names %q and %q: want distinct", a.Name, b.Name)
	}
	partial := Config{Timing: Timing{ProbeInterval: 3 * time.Second}}.withDefaults().Timing
	if partial.ProbeInterval != 3*time.Second || partial.ProbeTimeout != LANTiming().ProbeTimeout {
		t.Errorf("partial timing: %+v", partial)
	}
}
