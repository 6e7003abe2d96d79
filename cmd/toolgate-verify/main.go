// Command toolgate-verify checks a toolgate receipt offline, with nothing
// but the file and the gateway's verifier key: it says valid, or invalid
// and why, naming each entry at fault. It is built from one package,
// internal/proto/proof, with the standard library and golang.org/x/mod:
//
//	go build ./cmd/toolgate-verify
//	toolgate-verify --key 'toolgate/gw-…+…+…' receipt.json
//
// Exit status: 0 valid, 1 invalid, 2 not checked (usage, unreadable file).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/toolgate/toolgate/internal/proto/proof"
)

type keys []string

func (k *keys) String() string     { return fmt.Sprint(*k) }
func (k *keys) Set(v string) error { *k = append(*k, v); return nil }

func main() {
	var gateway, witnesses keys
	flag.Var(&gateway, "key", "the gateway's verifier key, or a file of keys (repeatable: keys from before a rotation)")
	flag.Var(&witnesses, "witness-key", "a witness that must have cosigned the checkpoint, or a file of them (repeatable)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: toolgate-verify --key KEY [--witness-key KEY …] RECEIPT")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || len(gateway) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var opts proof.Options
	var err error
	if opts.Keys, err = proof.KeyArgs(gateway); err != nil {
		fail(err)
	}
	if opts.Witnesses, err = proof.KeyArgs(witnesses); err != nil {
		fail(err)
	}
	data, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fail(err)
	}
	v, err := proof.Verify(data, opts)
	if proof.Report(os.Stdout, v, err) != nil {
		if _, invalid := err.(*proof.InvalidError); invalid {
			os.Exit(1)
		}
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "toolgate-verify:", err)
	os.Exit(2)
}
