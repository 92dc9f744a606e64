package pki

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LogExpiries logs every certificate c holds that ends within
// ExpiryWarning of now (an error once it has ended). Nodes call it at
// every start and reload.
func (c *Configurator) LogExpiries(log *slog.Logger, now time.Time) {
	for _, e := range c.Expiries() {
		left := e.NotAfter.Sub(now)
		switch {
		case left <= 0:
			log.Error("tls: a certificate has expired: peers refuse it; renew it and reload (SIGHUP)",
				"what", e.What, "subject", e.Subject, "not_after", e.NotAfter.UTC())
		case left <= ExpiryWarning:
			log.Warn("tls: a certificate expires soon: renew it and reload (SIGHUP)",
				"what", e.What, "subject", e.Subject, "not_after", e.NotAfter.UTC(), "days_left", int(left.Hours()/24))
		}
	}
}

// Collector exports the seconds until each certificate c holds expires,
// as namespace_tls_cert_expiry_seconds{what="cert"|"ca", subject}:
// negative once expired. It reads the certificates current when scraped.
func (c *Configurator) Collector(namespace string) prometheus.Collector {
	return collector{c: c, desc: prometheus.NewDesc(namespace+"_tls_cert_expiry_seconds",
		"Seconds until a TLS certificate this process uses expires (what: cert for its own, ca for each CA certificate); negative once expired.",
		[]string{"what", "subject"}, nil)}
}

type collector struct {
	c    *Configurator
	desc *prometheus.Desc
}

func (k collector) Describe(ch chan<- *prometheus.Desc) { ch <- k.desc }

func (k collector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, e := range k.c.Expiries() {
		ch <- prometheus.MustNewConstMetric(k.desc, prometheus.GaugeValue, e.NotAfter.Sub(now).Seconds(), e.What, e.Subject)
	}
}
