// Package alerts proves the chart's alerting rules and Grafana dashboards against the real
// thing: a local stack scraped by a real Prometheus (built from its Go module by
// hack/lib.sh's prometheus_tool) that evaluates the rules rendered from the chart. Each alert
// is raised by the fault that should raise it, and every dashboard query reads series that
// exist.
package alerts
