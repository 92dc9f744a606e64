//go:build !race

package cli

// raceEnabled tells leasesideBin to build the binary with -race too.
const raceEnabled = false
