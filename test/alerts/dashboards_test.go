package alerts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailor-autoscaler/tailor/test/testenv"
)

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	File       string
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// rateInterval is what the test puts for Grafana's $__rate_interval.
const rateInterval = "1m"

// readDashboards reads the chart's dashboards.
func readDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.Root(), "manifests", "charts", "tailor", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in the chart: %v", err)
	}
	var out []dashboard
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		d.File = filepath.Base(f)
		out = append(out, d)
	}
	return out
}

// TestDashboardsAreWellFormed: each dashboard has a unique uid, a Prometheus datasource
// variable that every panel uses, and panels whose targets all have an expression.
func TestDashboardsAreWellFormed(t *testing.T) {
	uids := map[string]string{}
	for _, d := range readDashboards(t) {
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: uid %q and title %q must be set", d.File, d.UID, d.Title)
		}
		if other, ok := uids[d.UID]; ok {
			t.Errorf("%s and %s share the uid %q", d.File, other, d.UID)
		}
		uids[d.UID] = d.File
		hasVariable := false
		for _, v := range d.Templating.List {
			hasVariable = hasVariable || (v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus")
		}
		if !hasVariable {
			t.Errorf("%s: no datasource variable of type prometheus", d.File)
		}
		if len(d.Panels) == 0 {
			t.Errorf("%s: no panels", d.File)
		}
		for _, p := range d.Panels {
			if p.Datasource.UID != "${datasource}" {
				t.Errorf("%s panel %q: datasource %q, want ${datasource}", d.File, p.Title, p.Datasource.UID)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s panel %q: no targets", d.File, p.Title)
			}
			for i, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s panel %q target %d: no expr", d.File, p.Title, i)
				}
			}
		}
	}
}
