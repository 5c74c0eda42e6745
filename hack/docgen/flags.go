package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/tailor-autoscaler/tailor/provisioner/operator"
)

// flagsPage lists tailor-provisioner's flags as its flag set defines them, with the
// environment variables that set them.
func flagsPage(string) (string, error) {
	fs := flag.NewFlagSet("tailor-provisioner", flag.ContinueOnError)
	operator.BindFlags(fs)
	env := map[string]string{}
	for _, e := range operator.Environment {
		env[e.Flag] = e.Env
	}
	var b strings.Builder
	b.WriteString(header("tailor-provisioner flags", "the sidecar's flag set (provisioner/operator)"))
	b.WriteString("Every flag of the sidecar. An environment variable, Karpenter's name where Karpenter has the setting, sets a flag not given on the command line; a bad value is an error naming the variable.\n\n")
	b.WriteString("| flag | default | environment | meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := "`" + f.DefValue + "`"
		if f.DefValue == "" {
			def = ""
		}
		e := ""
		if v := env[f.Name]; v != "" {
			e = "`" + v + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, cell(def), e, cell(f.Usage))
	})
	return b.String(), nil
}
