package gossip

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"
)

// Gossip keys for tests (AES-256).
var keyA = []byte("0123456789abcdef0123456789abcdef")
var keyB = []byte("fedcba9876543210fedcba9876543210")

// grantorMeta is grantor i's meta. Its addresses are labels only: nothing
// here dials them.
func grantorMeta(i int, leaderID string) Meta {
	return Meta{
		Role:     RoleGrantor,
		NodeID:   fmt.Sprintf("g%d", i),
		RPCAddr:  fmt.Sprintf("127.0.0.1:%d", 17000+i),
		RaftAddr: fmt.Sprintf("127.0.0.1:%d", 18000+i),
		Voter:    true,
		LeaderID: leaderID,
		Version:  "test",
	}
}

func sidecarMeta() Meta { return Meta{Role: RoleSidecar, Version: "test"} }

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

func testConfig(name string, meta Meta, key []byte, join ...string) Config {
	return Config{
		Name:             name,
		BindAddr:         "127.0.0.1:0",
		Join:             join,
		Keys:             keys(key),
		Meta:             meta,
		Logger:           testLogger(),
		Timing:           LoopbackTiming(),
		BroadcastTimeout: 10 * time.Second,
	}
}

// keys is the keyring of one key, or none for a nil key.
func keys(key []byte) [][]byte {
	if key == nil {
		return nil
	}
	return [][]byte{key}
}
