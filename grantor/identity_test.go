package grantor

import (
	"context"
	"testing"
)

func TestIdentityFromContext(t *testing.T) {
	if got := IdentityFrom(context.Background()); got != InsecureIdentity {
		t.Fatalf("IdentityFrom(no identity) = %v, want %v", got, InsecureIdentity)
	}
	if InsecureIdentity.Role != RoleOperator || InsecureIdentity.Name != "insecure" {
		t.Fatalf("InsecureIdentity = %v, want operator/insecure", InsecureIdentity)
	}
	want := Identity{Role: RoleSidecar, Name: "host-a"}
	ctx := ContextWithIdentity(context.Background(), want)
	if got := IdentityFrom(ctx); got != want {
		t.Fatalf("IdentityFrom = %v, want %v", got, want)
	}
	inner := ContextWithIdentity(ctx, Identity{Role: RoleGrantor, Name: "g1"})
	if got := IdentityFrom(inner); got.Role != RoleGrantor || got.Name != "g1" {
		t.Fatalf("inner IdentityFrom = %v, want grantor/g1", got)
	}
	if got := IdentityFrom(ctx); got != want {
		t.Fatalf("outer context changed: %v", got)
	}
}

func TestRoleStringParse(t *testing.T) {
	for _, r := range []Role{RoleGrantor, RoleSidecar, RoleOperator} {
		got, err := ParseRole(r.String())
		if err != nil || got != r {
			t.Fatalf("ParseRole(%q) = %v, %v; want %v", r.String(), got, err, r)
		}
	}
	for _, bad := range []string{"", "Grantor", "admin", "role(0)"} {
		if r, err := ParseRole(bad); err == nil {
			t.Fatalf("ParseRole(%q) = %v, want an error", bad, r)
		}
	}
	if s := (Identity{Role: RoleSidecar, Name: "h"}).String(); s != "sidecar/h" {
		t.Fatalf("Identity.String = %q", s)
	}
}
