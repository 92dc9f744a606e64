package clockwatch

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// Inputs that a broken estimator, a bad config or an attacker on the
// keepalive path could produce, besides ordinary ones.
var awkwardRates = []float64{
	0, math.Copysign(0, -1), 1e-300, 5e-324, -5e-324, 1, -1, 499.9999, 500, 500.0001, -600,
	1e4, -1e4, 1e6, -1e6, 1e12, 1e300, -1e300, math.MaxFloat64, -math.MaxFloat64,
	math.Inf(1), math.Inf(-1), math.NaN(),
}

func randomRate(rng *rand.Rand) float64 {
	switch rng.IntN(4) {
	case 0:
		return awkwardRates[rng.IntN(len(awkwardRates))]
	case 1:
		return (rng.Float64()*2 - 1) * 1000 // ordinary drift
	case 2:
		return (rng.Float64()*2 - 1) * math.Pow(10, rng.Float64()*20)
	default:
		return math.Float64frombits(rng.Uint64()) // anything at all
	}
}

// checkNeverLater is the safety property: an adjusted timing never gives a
// holder a later deadline, nor the grantor an earlier expiry, than the
// configured model t0 + d(1-rho) - eps and tG + d(1+rho) + eps.
func checkNeverLater(t *testing.T, base, adj Timing, t0 Instant, d time.Duration, what string) {
	t.Helper()
	if h, hb := adj.HolderDeadline(t0, d), base.HolderDeadline(t0, d); h.After(hb) {
		t.Fatalf("%s: holder deadline %v later than configured %v (base %+v, adjusted %+v, t0 %d, d %v)",
			what, h, hb, base, adj, t0, d)
	}
	if g, gb := adj.GrantorExpiry(t0, d), base.GrantorExpiry(t0, d); g.Before(gb) {
		t.Fatalf("%s: grantor expiry %v earlier than configured %v (base %+v, adjusted %+v, t0 %d, d %v)",
			what, g, gb, base, adj, t0, d)
	}
	if adj.Epsilon != base.Epsilon || !(adj.Rho >= base.Rho) || adj.Rho > max(base.Rho, MaxObservedRho) {
		t.Fatalf("%s: %+v adjusted to %+v", what, base, adj)
	}
}

// The property over many random inputs: terms from 0 to 100 days, t0 up
// to ten years of uptime, every valid rho and epsilon, and any observed
// rate and margin, including negative, NaN and infinite ones. Chained
// adjustments too.
func TestWithObservedRateNeverExtends(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 4242))
	for i := range 200000 {
		base := Timing{Rho: rng.Float64() * 0.1, Epsilon: time.Duration(rng.Int64N(int64(10 * time.Second)))}
		switch i % 10 {
		case 0:
			base.Rho = 0
		case 1:
			base = DefaultTiming()
		}
		t0 := Instant(rng.Int64N(int64(10 * 365 * 24 * time.Hour)))
		d := time.Duration(rng.Int64N(int64(100 * 24 * time.Hour)))
		if i%7 == 0 {
			d = time.Duration(rng.Int64N(100)) // tiny terms
		}
		adj := base
		for range 1 + rng.IntN(3) {
			adj = adj.WithObservedRate(randomRate(rng), randomRate(rng))
			checkNeverLater(t, base, adj, t0, d, "WithObservedRate")
		}
	}
}

func TestWithObservedRateRule(t *testing.T) {
	base := Timing{Rho: 500e-6, Epsilon: time.Second}
	tests := []struct {
		name         string
		rate, margin float64
		rho          float64
	}{
		{name: "below rho keeps rho", rate: 100, margin: 50, rho: 500e-6},
		{name: "beyond rho raises it", rate: 800, margin: 50, rho: 850e-6},
		{name: "negative counts by magnitude", rate: -800, margin: 50, rho: 850e-6},
		{name: "negative margin is none", rate: 800, margin: -500, rho: 800e-6},
		{name: "NaN margin is none", rate: 800, margin: math.NaN(), rho: 800e-6},
		{name: "NaN rate changes nothing", rate: math.NaN(), margin: 50, rho: 500e-6},
		{name: "infinite rate leaves no validity", rate: math.Inf(-1), margin: 0, rho: MaxObservedRho},
		{name: "infinite margin too", rate: 1, margin: math.Inf(1), rho: MaxObservedRho},
		{name: "absurd rate is capped", rate: 5e6, margin: 0, rho: MaxObservedRho},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := base.WithObservedRate(tc.rate, tc.margin)
			if math.Abs(got.Rho-tc.rho) > 1e-15 || got.Epsilon != base.Epsilon {
				t.Fatalf("WithObservedRate(%v, %v) = %+v, want rho %v", tc.rate, tc.margin, got, tc.rho)
			}
		})
	}
	// At the cap a holder's deadline is t0 - eps: nothing left.
	if got := base.WithObservedRate(math.Inf(1), 0).HolderDeadline(100*Instant(time.Second), time.Hour); got != 99*Instant(time.Second) {
		t.Fatalf("holder deadline at the cap = %v, want t0 - eps", got)
	}
}

// FuzzWithObservedRate checks the property on inputs the fuzzer finds.
func FuzzWithObservedRate(f *testing.F) {
	for _, r := range awkwardRates {
		f.Add(int64(time.Hour), int64(15*time.Second), DefaultRho, int64(DefaultEpsilon), r, 50.0)
		f.Add(int64(0), int64(1), 0.0, int64(0), 50.0, r)
	}
	f.Fuzz(func(t *testing.T, t0, d int64, rho float64, eps int64, rate, margin float64) {
		base := Timing{Rho: rho, Epsilon: time.Duration(eps)}
		// The model's domain: a valid timing, a term of at most 100 days,
		// instants that cannot overflow.
		if base.Validate() != nil || eps > int64(time.Hour) || t0 < 0 || t0 > 1<<61 || d < 0 || d > int64(100*24*time.Hour) {
			t.Skip()
		}
		checkNeverLater(t, base, base.WithObservedRate(rate, margin), Instant(t0), time.Duration(d), "fuzz")
	})
}
