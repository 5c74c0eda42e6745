package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tailor-autoscaler/tailor/provisioner/convert"
)

const convertUsage = `Usage: tailorctl convert -f FILE

Converts Karpenter v1alpha5 Provisioners and v1alpha1 AWSNodeTemplates, and v1beta1 NodePools
and EC2NodeClasses, into the karpenter.sh/v1 NodePools and karpenter.k8s.aws/v1 EC2NodeClasses
Tailor reads. The YAML goes to standard output, the report of what changed and what could not
be carried over to standard error.

Flags:
`

func runConvert(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, convertUsage)
		fs.PrintDefaults()
	}
	var file string
	fs.StringVar(&file, "f", "", "File to convert, YAML or JSON (- reads standard input). Same as --filename.")
	fs.StringVar(&file, "filename", "", "File to convert, YAML or JSON (- reads standard input).")
	positional, err := parse(fs, args)
	if err != nil {
		return helpIsNotAnError(err)
	}
	if len(positional) > 0 {
		return fmt.Errorf("unexpected arguments %q: give the file with -f FILE", positional)
	}
	if file == "" {
		return errors.New("no file: give it with -f FILE (- reads standard input)")
	}
	var data []byte
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	res, err := convert.Convert(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := res.WriteYAML(stdout); err != nil {
		return err
	}
	return res.Report.Write(stderr)
}
