package cli

import (
	"context"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// METRICS.md at the repository root lists every metric family a metrics
// port serves; a test in this package (TestMetricsDoc) generates it from
// the collectors registered here and fails when it is out of date.
//go:generate go test -count=1 -run ^TestMetricsDoc$ . -args -update-metrics-doc

// runtimeCollectors are the collectors every metrics port serves besides
// its daemon's or grantor's: the Go runtime's and the process's.
func runtimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}

// serveMetrics serves Prometheus metrics of cs (plus runtimeCollectors)
// at http://addr/metrics, and a short index at http://addr/, until ctx
// ends. It returns once the listener is bound, so that the address is
// known to be in use.
func serveMetrics(ctx context.Context, addr string, log *slog.Logger, cs ...prometheus.Collector) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(runtimeCollectors()...)
	for _, c := range cs {
		reg.MustRegister(c)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/{$}", metricsIndex)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
	return nil
}

// metricsIndexPage is what / on a metrics port shows.
const metricsIndexPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>leaseside metrics</title></head>
<body>
<h1>leaseside %s</h1>
<p><a href="/metrics">/metrics</a>: Prometheus metrics of this process, in the text exposition format.</p>
<p>Every metric family is described in METRICS.md (installed as /usr/share/doc/leaseside/METRICS.md);
Grafana dashboard and Prometheus alert rules: /usr/share/doc/leaseside/examples/.</p>
</body></html>
`

// metricsIndex serves / on a metrics port: what is there, instead of a 404.
func metricsIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, metricsIndexPage, html.EscapeString(Version))
}
