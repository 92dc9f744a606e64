package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
)

// METRICS.md is generated here from the collectors the metrics ports
// register (serveMetrics): a real grantor node and a real sidecar daemon,
// each described (name, help, labels) and collected (type). Regenerate it
// with `make metrics-doc`.
var updateMetricsDoc = flag.Bool("update-metrics-doc", false, "rewrite METRICS.md from the collectors")

const metricsDocPath = "../../../METRICS.md"

// metricSection is one part of METRICS.md: what one kind of process
// registers.
type metricSection struct {
	title, intro string
	collectors   []prometheus.Collector
}

// metricFamily is one row of METRICS.md.
type metricFamily struct {
	name, kind, help string
	labels           []string
}

// METRICS.md lists every metric family a metrics port serves, with its
// type, labels and meaning, exactly as the collectors describe them: a
// family added, renamed or redescribed fails this test until METRICS.md
// is regenerated.
func TestMetricsDoc(t *testing.T) {
	doc := renderMetricsDoc(t, liveMetricSections(t))
	if *updateMetricsDoc {
		if err := os.WriteFile(metricsDocPath, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", filepath.Clean(metricsDocPath))
		return
	}
	old, err := os.ReadFile(metricsDocPath)
	if err != nil {
		t.Fatalf("%v: generate it with `make metrics-doc`", err)
	}
	if !bytes.Equal(old, doc) {
		oldLines, newLines := strings.Split(string(old), "\n"), strings.Split(string(doc), "\n")
		i := 0
		for i < len(oldLines) && i < len(newLines) && oldLines[i] == newLines[i] {
			i++
		}
		line := func(ls []string) string {
			if i < len(ls) {
				return ls[i]
			}
			return "(end of file)"
		}
		t.Fatalf("METRICS.md is out of date with the collectors: regenerate it with `make metrics-doc` and commit it.\n"+
			"First difference, line %d:\n  METRICS.md: %s\n  generated:  %s", i+1, line(oldLines), line(newLines))
	}
}

// liveMetricSections starts a grantor node (one voter, with gossip) and a
// sidecar daemon on loopback, as dev does, and returns their collectors.
func liveMetricSections(t *testing.T) []metricSection {
	t.Helper()
	// With TLS, as in production: the certificates' expiry is exported.
	ca := t.TempDir()
	if err := pki.CreateCA(ca, 0); err != nil {
		t.Fatal(err)
	}
	tlsConf := func(role, name string) *pki.Configurator {
		cert, key, err := pki.CreateCert(ca, pki.CertRequest{Identity: pki.Identity{Role: role, Name: name}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := pki.NewConfigurator(pki.Files{CA: filepath.Join(ca, pki.CAFile), Cert: cert, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	gcfg := grantor.DefaultConfig()
	gcfg.NodeID = "metrics-doc"
	gcfg.DataDir = t.TempDir()
	gcfg.Bootstrap = true
	gcfg.TLS = tlsConf(pki.RoleGrantor, gcfg.NodeID)
	gcfg.Gossip = &gossip.Config{BindAddr: "127.0.0.1:0", Meta: gossip.Meta{Version: Version}}
	node, err := grantor.New(gcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown() })

	dcfg := daemon.DefaultConfig()
	dcfg.Grantors = []string{node.RPCAddr()}
	sideTLS := tlsConf(pki.RoleSidecar, "metrics-doc")
	dcfg.Credentials = sideTLS.ClientCredentials()
	d, err := daemon.New(dcfg)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "lsmd") // short: a socket path must fit sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ran:
		case <-time.After(time.Minute):
			t.Error("daemon did not stop")
		}
	})

	return []metricSection{
		{title: "Sidecar", intro: "Served by `leaseside daemon --metrics-addr ADDR` and `leaseside dev --metrics-addr ADDR`.",
			collectors: []prometheus.Collector{d.Collector(), sideTLS.Collector("leaseside_sidecar")}},
		{title: "Grantor", intro: "Served by `leaseside grantor --metrics-addr ADDR` (or `metrics_addr` in grantor.json) and by `leaseside dev`.",
			collectors: []prometheus.Collector{node.Collector()}},
		{title: "Go runtime and process", intro: "Served on every metrics port besides the families above (client_golang's Go and process collectors).",
			collectors: runtimeCollectors()},
	}
}

// descRE parses prometheus.Desc.String(), which is all a Desc tells of
// itself.
var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "(?:[^"\\]|\\.)*", constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// families describes and collects the section's collectors.
func (s metricSection) families(t *testing.T) []metricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.collectors...)
	gathered, err := reg.Gather()
	if err != nil {
		t.Fatalf("%s: gathering: %v", s.title, err)
	}
	kinds := map[string]dto.MetricType{}
	for _, f := range gathered {
		kinds[f.GetName()] = f.GetType()
	}
	descs := make(chan *prometheus.Desc, 512)
	go func() {
		for _, c := range s.collectors {
			c.Describe(descs)
		}
		close(descs)
	}()
	var out []metricFamily
	for d := range descs {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("%s: cannot read %s", s.title, d)
		}
		name, err1 := strconv.Unquote(m[1])
		help, err2 := strconv.Unquote(m[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: cannot read %s", s.title, d)
		}
		f := metricFamily{name: name, help: help}
		for _, l := range strings.Split(m[4], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				f.labels = append(f.labels, l)
			}
		}
		if m[3] != "" {
			f.labels = append(f.labels, strings.Split(m[3], ",")...)
		}
		switch k, ok := kinds[name]; {
		case ok:
			f.kind = strings.ToLower(k.String())
		case strings.HasSuffix(name, "_total"):
			f.kind = "counter" // no sample yet: named as a counter
		default:
			f.kind = "gauge" // no sample yet (for example before the first keepalive)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b metricFamily) int { return strings.Compare(a.name, b.name) })
	return out
}

// renderMetricsDoc writes METRICS.md.
func renderMetricsDoc(t *testing.T, sections []metricSection) []byte {
	t.Helper()
	var body bytes.Buffer
	total := 0
	for _, s := range sections {
		fams := s.families(t)
		total += len(fams)
		fmt.Fprintf(&body, "\n## %s (%d families)\n\n%s\n\n| family | type | labels | meaning |\n| --- | --- | --- | --- |\n", s.title, len(fams), s.intro)
		for _, f := range fams {
			labels := "-"
			if len(f.labels) > 0 {
				labels = "`" + strings.Join(f.labels, "`, `") + "`"
			}
			fmt.Fprintf(&body, "| `%s` | %s | %s | %s |\n", f.name, f.kind, labels, strings.ReplaceAll(f.help, "|", `\|`))
		}
	}
	var doc bytes.Buffer
	fmt.Fprintf(&doc, `# Metrics

<!-- Generated by TestMetricsDoc (cmd/leaseside/cli/metricsdoc_test.go) from
the collectors the metrics ports register; do not edit. Regenerate with
`+"`make metrics-doc`"+` after adding or changing a metric. -->

Every leaseside process started with `+"`--metrics-addr ADDR`"+` serves Prometheus
metrics at `+"`http://ADDR/metrics`"+` (and a short index at `+"`http://ADDR/`"+`):
%d metric families in all, listed below with their type, labels and
meaning. A family may have no sample until there is something to report
(a drift rate before the first keepalive, gossip members without gossip);
its type is then given by its name (`+"`_total`"+`: counter).

[packaging/grafana-dashboard.json](packaging/grafana-dashboard.json) is a
Grafana dashboard of them and
[packaging/prometheus-rules.yml](packaging/prometheus-rules.yml) alert
rules; the packages install both in /usr/share/doc/leaseside/examples/.
`, total)
	doc.Write(body.Bytes())
	return doc.Bytes()
}
