// Command chaosclient is a client process of the chaos suite: the suite
// builds it and starts it on its sidecar hosts with its configuration in
// the environment (see package workload).
package main

import "github.com/leaseside/leaseside/internal/chaos/workload"

func main() {
	workload.Main()
}
