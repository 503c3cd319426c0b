// Checks a kind cluster config as kind reads it: strict YAML into kind's own v1alpha4 types (an
// unknown or misspelt field is an error), then the rules kind applies to nodes. Used by
// test/kind-config.test.ts; built into the cache, never shipped.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

func main() {
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail(err)
	}
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		fail(err)
	}
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		fail(fmt.Errorf("kind/apiVersion: want Cluster kind.x-k8s.io/v1alpha4, got %s %s", c.Kind, c.APIVersion))
	}
	planes := 0
	for i, n := range c.Nodes {
		switch n.Role {
		case v1alpha4.ControlPlaneRole:
			planes++
		case v1alpha4.WorkerRole:
		default:
			fail(fmt.Errorf("nodes[%d].role: %q is neither control-plane nor worker", i, n.Role))
		}
	}
	if len(c.Nodes) > 0 && planes == 0 {
		fail(fmt.Errorf("nodes: at least one control-plane node is required"))
	}
	fmt.Printf("ok: %d nodes\n", len(c.Nodes))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
