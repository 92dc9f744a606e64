package clockwatch

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// link simulates keepalives between a local clock running ratePPM fast
// against a remote one, over a network whose one-way delays are drawn
// from out and back. True time is the remote clock's.
type link struct {
	ratePPM  float64
	local0   Instant // local BOOTTIME at true time 0
	remote0  Instant // remote BOOTTIME at true time 0
	out      func() time.Duration
	back     func() time.Duration
	trueTime time.Duration // when the next remote reading happens
}

func (l *link) local(t float64) Instant {
	return l.local0 + Instant(math.Round(t*(1+l.ratePPM*1e-6)))
}

// next returns the sample of a keepalive whose remote reading happens at
// the current true time, and moves time on by every.
func (l *link) next(every time.Duration) Sample {
	tg := float64(l.trueTime)
	s := Sample{
		Sent:     l.local(tg - float64(l.out())),
		Received: l.local(tg + float64(l.back())),
		Remote:   l.remote0 + Instant(l.trueTime),
	}
	l.trueTime += every
	return s
}

// asymmetric returns delay distributions of 0.1-5ms, different each way,
// with an occasional slow message (a retransmit, a GC in the grantor).
func asymmetric(rng *rand.Rand) (out, back func() time.Duration) {
	out = func() time.Duration {
		d := 100*time.Microsecond + time.Duration(rng.ExpFloat64()*float64(800*time.Microsecond))
		if rng.IntN(50) == 0 {
			d += time.Duration(rng.IntN(200)) * time.Millisecond
		}
		return min(d, 5*time.Millisecond)
	}
	back = func() time.Duration {
		return 300*time.Microsecond + time.Duration(rng.Float64()*float64(4700*time.Microsecond))
	}
	return out, back
}

// The estimator recovers a known rate from an hour of keepalives five
// seconds apart, whatever the network does to each message.
func TestDriftEstimatorRecoversRate(t *testing.T) {
	for _, rate := range []float64{0, 50, -50, 200, -200, 800, -3000} {
		rng := rand.New(rand.NewPCG(1, uint64(math.Float64bits(rate))))
		out, back := asymmetric(rng)
		l := &link{
			ratePPM: rate, out: out, back: back,
			local0: Instant(3 * 24 * time.Hour), remote0: Instant(40 * 24 * time.Hour),
		}
		e := NewDriftEstimator(DriftConfig{})
		for range 720 {
			e.Add(l.next(5*time.Second + time.Duration(rng.IntN(int(time.Second)))))
		}
		d, ok := e.Estimate()
		if !ok {
			t.Fatalf("rate %v: no estimate after an hour: %+v", rate, d)
		}
		t.Logf("rate %+7.1f ppm: estimate %+.4f in [%+.4f, %+.4f], %d samples over %v",
			rate, d.PPM, d.MinPPM, d.MaxPPM, d.Samples, d.Span.Round(time.Second))
		if !d.Consistent || d.MinPPM > rate || d.MaxPPM < rate {
			t.Errorf("rate %v: true rate outside the bounds [%v, %v] (consistent %v)", rate, d.MinPPM, d.MaxPPM, d.Consistent)
		}
		if err := math.Abs(d.PPM - rate); err > 0.5 {
			t.Errorf("rate %v: estimate %v is %v ppm off", rate, d.PPM, err)
		}
		if ppm, ok := e.Rate(); !ok || ppm != d.PPM {
			t.Errorf("Rate() = %v, %v; Estimate gave %v", ppm, ok, d.PPM)
		}
	}
}

// A constant asymmetry (every request slower than its reply) shifts the
// offset, not the rate.
func TestDriftEstimatorConstantAsymmetry(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	jitter := func(base time.Duration) func() time.Duration {
		return func() time.Duration { return base + time.Duration(rng.IntN(int(200*time.Microsecond))) }
	}
	l := &link{ratePPM: 120, out: jitter(5 * time.Millisecond), back: jitter(100 * time.Microsecond)}
	e := NewDriftEstimator(DriftConfig{})
	for range 120 { // ten minutes
		e.Add(l.next(5 * time.Second))
	}
	ppm, ok := e.Rate()
	if !ok || math.Abs(ppm-120) > 2 {
		t.Fatalf("Rate = %v, %v; want 120 +- 2", ppm, ok)
	}
}

func TestDriftEstimatorNeedsSamplesAndSpan(t *testing.T) {
	l := &link{ratePPM: 10, out: func() time.Duration { return time.Millisecond }, back: func() time.Duration { return time.Millisecond }}
	e := NewDriftEstimator(DriftConfig{MinSamples: 10, MinSpan: 2 * time.Minute})
	if _, ok := e.Rate(); ok {
		t.Fatal("a rate from no samples")
	}
	for i := range 24 { // two minutes at 5s, less the last one
		e.Add(l.next(5 * time.Second))
		if d, ok := e.Estimate(); ok {
			t.Fatalf("a rate after %d samples over %v: %+v", i+1, d.Span, d)
		}
	}
	e.Add(l.next(5 * time.Second))
	if d, ok := e.Estimate(); !ok || d.Samples != 25 {
		t.Fatalf("no rate after 25 samples over %v: %+v", d.Span, d)
	}
}

// Another grantor has another BOOTTIME: the window starts over rather
// than reading the jump as drift.
func TestDriftEstimatorRestartsOnRemoteJump(t *testing.T) {
	l := &link{ratePPM: 0, out: func() time.Duration { return time.Millisecond }, back: func() time.Duration { return time.Millisecond }}
	e := NewDriftEstimator(DriftConfig{})
	for range 100 {
		e.Add(l.next(5 * time.Second))
	}
	if _, ok := e.Rate(); !ok {
		t.Fatal("no rate before the jump")
	}
	l.remote0 += Instant(17 * time.Hour) // a new leader, up for longer
	e.Add(l.next(5 * time.Second))
	d, ok := e.Estimate()
	if ok || d.Samples != 1 || d.Restarts != 1 {
		t.Fatalf("after a remote jump: ok %v, %+v; want a fresh window of 1 sample", ok, d)
	}
	l.remote0 -= Instant(time.Hour) // and back to an earlier one
	e.Add(l.next(5 * time.Second))
	if d, _ := e.Estimate(); d.Samples != 1 || d.Restarts != 2 {
		t.Fatalf("after a backwards jump: %+v", d)
	}
	e.Reset()
	if d, _ := e.Estimate(); d.Samples != 0 {
		t.Fatalf("after Reset: %+v", d)
	}
}

// Memory stays bounded however often keepalives come, and the window
// keeps the fastest round trip of each bucket.
func TestDriftEstimatorBoundedWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	out, back := asymmetric(rng)
	l := &link{ratePPM: -40, out: out, back: back}
	cfg := DriftConfig{Bucket: 5 * time.Second, MaxSamples: 100, MaxSpan: time.Hour}
	e := NewDriftEstimator(cfg)
	for range 5000 {
		e.Add(l.next(time.Second))
	}
	d, ok := e.Estimate()
	if !ok || d.Samples > 100 || d.Span > 100*5*time.Second+5*time.Second {
		t.Fatalf("window after 5000 samples: ok %v, %+v", ok, d)
	}
	if math.Abs(d.PPM+40) > 2 {
		t.Fatalf("estimate %v, want -40 +- 2", d.PPM)
	}

	e = NewDriftEstimator(DriftConfig{MaxSpan: 10 * time.Minute})
	for range 1000 {
		e.Add(l.next(5 * time.Second))
	}
	if d, _ := e.Estimate(); d.Span > 10*time.Minute {
		t.Fatalf("span %v beyond MaxSpan", d.Span)
	}

	e = NewDriftEstimator(DriftConfig{})
	base := Instant(time.Hour).Add(-Instant(time.Hour).Sub(0) % (5 * time.Second)) // start of a bucket
	slow := Sample{Sent: base, Received: base.Add(10 * time.Millisecond), Remote: 1000}
	fast := Sample{Sent: base.Add(time.Second), Received: base.Add(time.Second + time.Millisecond), Remote: 1000 + Instant(time.Second)}
	slower := Sample{Sent: base.Add(2 * time.Second), Received: base.Add(2*time.Second + 5*time.Millisecond), Remote: 1000 + Instant(2*time.Second)}
	e.Add(slow)
	e.Add(fast)
	e.Add(slower)
	if len(e.s) != 1 || e.s[0] != fast {
		t.Fatalf("bucket kept %+v, want only the fastest round trip %+v", e.s, fast)
	}
	e.Add(Sample{Sent: base.Add(-time.Minute), Received: base.Add(-time.Minute + time.Millisecond), Remote: 1000 - Instant(time.Minute)})
	e.Add(Sample{Sent: base.Add(10 * time.Second), Received: base.Add(9 * time.Second), Remote: 1000 + Instant(10*time.Second)})
	if len(e.s) != 1 {
		t.Fatalf("an out-of-order or backwards sample was kept: %+v", e.s)
	}
}

// A rate that changes within the window shows as inconsistent bounds that
// span both rates, never as a falsely precise estimate.
func TestDriftEstimatorRateChange(t *testing.T) {
	fixed := func() time.Duration { return 200 * time.Microsecond }
	l := &link{ratePPM: 0, out: fixed, back: fixed}
	e := NewDriftEstimator(DriftConfig{})
	for range 360 {
		e.Add(l.next(5 * time.Second))
	}
	// Continue from where the local clock is, at a new rate.
	now := float64(l.trueTime)
	l.local0 = l.local(now) - Instant(math.Round(now*(1+300e-6)))
	l.ratePPM = 300
	for range 360 {
		e.Add(l.next(5 * time.Second))
	}
	d, ok := e.Estimate()
	if !ok || d.Consistent || d.MinPPM > 1 || d.MaxPPM < 299 || d.WorstPPM() < 299 {
		t.Fatalf("after a rate change 0 -> 300ppm: ok %v, %+v", ok, d)
	}
}
