// Package library holds leaseside's Redis function library (leaseside.lua:
// leaseside_set and leaseside_del) as text, with no Redis client, so that
// a program can load it with a client of its own choosing (leaseside's
// CLI does, without linking go-redis).
package library

import _ "embed"

// Lua is leaseside.lua, the Redis 7 function library "leaseside".
//
//go:embed leaseside.lua
var Lua string
