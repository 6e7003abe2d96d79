// Command benchdriver runs inside a sandbox for the hook benchmarks: it
// starts ARGV -n times with stdin from -in and prints the wall time of each
// run, process start to exit (the decision is printed just before exit),
// as p50/p99 in microseconds. Built static by the benchmark.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"
)

func main() {
	n := flag.Int("n", 500, "runs")
	in := flag.String("in", "", "stdin file")
	flag.Parse()
	stdin, err := os.ReadFile(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var d []time.Duration
	var out bytes.Buffer
	for range *n {
		out.Reset()
		cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
		cmd.Stdin, cmd.Stdout = bytes.NewReader(stdin), &out
		start := time.Now()
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"p50_us": d[len(d)/2].Microseconds(), "p99_us": d[len(d)*99/100].Microseconds(), "last_stdout": out.String(),
	})
}
