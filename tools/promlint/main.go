// promlint reads Prometheus text exposition on stdin and prints what Prometheus's own linter
// (client_golang's testutil/promlint, the rules of `promtool check metrics`) finds, one problem a
// line as "metric: text". Exit 0 when clean, 3 when problems were found, 1 when the input does not parse.
package main

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func main() {
	problems, err := promlint.New(os.Stdin).Lint()
	if err != nil {
		fmt.Fprintf(os.Stderr, "promlint: %v\n", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Printf("%s: %s\n", p.Metric, p.Text)
	}
	if len(problems) > 0 {
		os.Exit(3)
	}
}
