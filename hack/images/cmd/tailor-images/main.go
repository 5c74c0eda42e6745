// Command tailor-images builds Tailor's images for every platform without a container runtime
// (package images), writes each image index as an OCI layout under --out, with the Helm chart's
// OCI artifact beside them, and prints their digests. With --push it pushes the images as
// <prefix>/<name>:<tag> and the chart as <prefix>/charts/<chart>:<chart version>, with the
// docker config's credentials. `make images` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tailor-autoscaler/tailor/hack/images"
)

func main() {
	root := flag.String("root", ".", "Repository root: the Go module the binaries are built from, and the git work tree whose commit stamps them.")
	chart := flag.String("chart", "manifests/charts/tailor", "Helm chart directory, relative to --root.")
	out := flag.String("out", "_output/images", "Directory the OCI layouts are written to: <out>/<image> and <out>/charts/<chart>.")
	tag := flag.String("tag", "", "Tag and version of the images; the chart's appVersion when empty.")
	push := flag.String("push", "", "Registry and path prefix to push to, e.g. 123456789012.dkr.ecr.us-west-2.amazonaws.com/tailor; nothing is pushed when empty.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, *root, filepath.Join(*root, *chart), *out, *tag, *push)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tailor-images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root, chartDir, out, tag, push string) error {
	chart, err := images.PackageChart(chartDir)
	if err != nil {
		return err
	}
	if tag == "" {
		tag = chart.Metadata.AppVersion
	}
	commit, err := images.HeadCommit(ctx, root)
	if err != nil {
		return err
	}
	// SOURCE_DATE_EPOCH, the reproducible-builds convention, overrides the commit's time.
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if commit.Time, err = images.ParseEpoch(s); err != nil {
			return fmt.Errorf("reading SOURCE_DATE_EPOCH: %w", err)
		}
	}
	var source string
	if len(chart.Metadata.Sources) > 0 {
		source = chart.Metadata.Sources[0]
	}
	stamp := images.Stamp{Source: source, Version: tag, Revision: commit.Revision, Created: commit.Time}

	specs, platforms := images.Tailor(), images.Platforms()
	tmp, err := os.MkdirTemp("", "tailor-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(os.Stderr, "compiling %s for %s\n", names(specs), platformNames(platforms))
	bins, err := images.Compile(ctx, root, tmp, specs, platforms)
	if err != nil {
		return err
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	indexes := make([]v1.ImageIndex, len(specs))
	for i, s := range specs {
		if indexes[i], err = images.Index(s, bins, stamp); err != nil {
			return err
		}
		dir := filepath.Join(out, s.Name)
		if err := images.WriteLayout(dir, indexes[i], tag); err != nil {
			return err
		}
		if err := printDigest(w, s.Name+":"+tag, indexes[i], dir); err != nil {
			return err
		}
	}
	art, err := chart.Artifact(commit.Time)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, chart.Repository())
	if err := images.WriteImageLayout(dir, art, chart.Tag()); err != nil {
		return err
	}
	if err := printDigest(w, chart.Repository()+":"+chart.Tag(), art, dir); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if push == "" {
		return nil
	}

	reg, err := images.NewRegistry(push, authn.DefaultKeychain, nil)
	if err != nil {
		return err
	}
	for i, s := range specs {
		ref, err := reg.PushIndex(ctx, s.Name, tag, indexes[i])
		if err != nil {
			return err
		}
		if err := printPushed(ref, indexes[i]); err != nil {
			return err
		}
	}
	ref, err := reg.PushImage(ctx, chart.Repository(), chart.Tag(), art)
	if err != nil {
		return err
	}
	return printPushed(ref, art)
}

// printPushed prints the reference a node or Helm pulls: ref@digest.
func printPushed(ref fmt.Stringer, m interface{ Digest() (v1.Hash, error) }) error {
	d, err := m.Digest()
	if err != nil {
		return fmt.Errorf("computing the digest of %s: %w", ref, err)
	}
	_, err = fmt.Printf("pushed %s@%s\n", ref, d)
	return err
}

func printDigest(w *tabwriter.Writer, what string, m interface{ Digest() (v1.Hash, error) }, where string) error {
	d, err := m.Digest()
	if err != nil {
		return fmt.Errorf("computing the digest of %s: %w", what, err)
	}
	_, err = fmt.Fprintf(w, "%s\t%s\t%s\n", what, d, where)
	return err
}

func names(specs []images.Spec) string {
	var s []string
	for _, sp := range specs {
		s = append(s, sp.Name)
	}
	return strings.Join(s, ", ")
}

func platformNames(platforms []v1.Platform) string {
	var s []string
	for _, p := range platforms {
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}
