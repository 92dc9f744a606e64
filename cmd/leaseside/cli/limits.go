package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/leaseside/leaseside/grantor"
)

// The grantor's account limits (docs/limits.md), from the config file's
// "limits" key and the --limit flags:
//
//	"limits": {
//	  "sidecar":  {"leases": 50000},
//	  "operator": {"calls": 1024},
//	  "identities": {"sidecar/web-7": {"watch_names": 65536}}
//	}
//
//	--limit sidecar.leases=50000 --limit sidecar/web-7.watch_names=65536
//
// A role's keys replace its defaults one by one; an identity's entry
// starts from its role's limits and replaces the keys it names.

// limitsFileConfig is the config file's "limits" object.
type limitsFileConfig struct {
	Sidecar    json.RawMessage            `json:"sidecar"`
	Operator   json.RawMessage            `json:"operator"`
	Grantor    json.RawMessage            `json:"grantor"`
	Identities map[string]json.RawMessage `json:"identities"`
}

// roleLimits returns the limits of role in a, to change.
func roleLimits(a *grantor.AccountLimits, role string) (*grantor.Limits, error) {
	switch role {
	case "sidecar":
		return &a.Sidecar, nil
	case "operator":
		return &a.Operator, nil
	case "grantor":
		return &a.Grantor, nil
	}
	return nil, fmt.Errorf("unknown role %q (want sidecar, operator or grantor)", role)
}

// identityLimits returns the limits of identity ROLE/NAME in a, to
// change; a new entry starts from its role's.
func identityLimits(a *grantor.AccountLimits, id string) (*grantor.Limits, error) {
	role, name, _ := strings.Cut(id, "/")
	base, err := roleLimits(a, role)
	if err != nil || name == "" {
		return nil, fmt.Errorf("identity %q: want ROLE/NAME, such as sidecar/web-7", id)
	}
	if a.Identities == nil {
		a.Identities = map[string]grantor.Limits{}
	}
	l, ok := a.Identities[id]
	if !ok {
		l = *base
	}
	a.Identities[id] = l
	return &l, nil
}

// decodeLimits lays the keys of raw over *l; unknown keys are errors.
func decodeLimits(raw json.RawMessage, l *grantor.Limits) error {
	if raw == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(l)
}

// applyLimitsFile applies the config file's "limits" object to a.
func applyLimitsFile(fc *limitsFileConfig, a *grantor.AccountLimits) error {
	for _, r := range []struct {
		role string
		raw  json.RawMessage
	}{{"sidecar", fc.Sidecar}, {"operator", fc.Operator}, {"grantor", fc.Grantor}} {
		l, _ := roleLimits(a, r.role)
		if err := decodeLimits(r.raw, l); err != nil {
			return fmt.Errorf("limits.%s: %w", r.role, err)
		}
	}
	for id, raw := range fc.Identities {
		l, err := identityLimits(a, id)
		if err != nil {
			return fmt.Errorf("limits.identities: %w", err)
		}
		if err := decodeLimits(raw, l); err != nil {
			return fmt.Errorf("limits.identities.%s: %w", id, err)
		}
		a.Identities[id] = *l
	}
	return nil
}

// applyLimitFlag applies one --limit WHO.KEY=N to a, WHO a role or
// ROLE/NAME and KEY a limit's config key.
func applyLimitFlag(s string, a *grantor.AccountLimits) error {
	lhs, v, ok := strings.Cut(s, "=")
	i := strings.LastIndexByte(lhs, '.')
	if !ok || i < 0 {
		return fmt.Errorf("--limit %q: want ROLE.KEY=N or ROLE/NAME.KEY=N, such as sidecar.leases=50000", s)
	}
	who, key := lhs[:i], lhs[i+1:]
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("--limit %q: %q is not a count (0 or more; 0 is no limit)", s, v)
	}
	var l *grantor.Limits
	if strings.Contains(who, "/") {
		l, err = identityLimits(a, who)
	} else {
		l, err = roleLimits(a, who)
	}
	if err != nil {
		return fmt.Errorf("--limit %q: %w", s, err)
	}
	if err := decodeLimits(json.RawMessage(fmt.Sprintf("{%q: %d}", key, n)), l); err != nil {
		return fmt.Errorf("--limit %q: no limit named %q (see docs/limits.md)", s, key)
	}
	if strings.Contains(who, "/") {
		a.Identities[who] = *l
	}
	return nil
}
