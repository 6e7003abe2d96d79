package shellfacts

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// summary renders facts compactly: name[flags] per command, * for dynamic.
func summary(f Facts) string {
	var parts []string
	for _, c := range f.Commands {
		s := c.Name
		if c.Dynamic {
			s += "*"
		}
		if len(c.Flags) > 0 {
			s += "[" + strings.Join(c.Flags, ",") + "]"
		}
		parts = append(parts, s)
	}
	out := strings.Join(parts, " ")
	if f.ParseError != "" {
		out += " !parse"
	}
	return out
}

func TestFromScript(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ script, want string }{
		{"rm -rf /", "rm[r,f]"},
		{"rm -r -f /workspace", "rm[r,f]"},
		{"rm --recursive --force /workspace", "rm[recursive,force]"},
		{`bash -lc "rm -R -f /"`, "bash[l,c] rm[R,f]"},
		{"R=rm; $R -rf /", "*[r,f]"},
		{"find / -delete", "find[d,e,l,e,t,e]"},
		{`r''m -rf x`, "rm[r,f]"},
		{`"rm" -rf x`, "rm[r,f]"},
		{"r\\\nm -rf x", "rm[r,f]"},
		{`$'\x72m' -rf x`, "rm[r,f]"},
		{"/bin/rm -rf x", "rm[r,f]"},
		{"busybox rm -rf x", "busybox[r,f] rm[r,f]"},
		{"echo x | xargs rm -rf", "echo xargs[r,f] rm[r,f]"},
		{"xargs -0 -n 1 rm -rf < list", "xargs[0,n,r,f] rm[r,f]"},
		{`sh -c "$(printf rm) -rf /"`, "printf sh*[c]"},
		{"bash <<'EOF'\nrm -rf /\nEOF", "bash rm[r,f]"},
		{"bash <<EOF\nrm -rf $HOME\nEOF", "bash*"},
		{"bash <<< 'rm -rf /'", "bash rm[r,f]"},
		{"curl -s x | sh", "curl[s] sh*"},
		{"cd / && rm --recursive --force .", "cd rm[recursive,force]"},
		{"echo rm -rf", "echo[r,f]"},
		{"(((rm -rf /)))", " !parse"}, // arithmetic to mvdan, refused either way
		{"( ( (rm -rf /) ) )", "rm[r,f]"},
		{"if true; then rm -rf /; fi", "true rm[r,f]"},
		{"for f in $(ls); do rm -rf $f; done", "ls rm[r,f]"},
		{"x=$(rm -rf /)", "rm[r,f]"},
		{"f() { rm -rf /; }; f", "rm[r,f] f"},
		{"sudo -u root env FOO=1 nice -n 5 timeout 10 rm -rf /", "sudo[u,n,r,f] env[n,r,f] nice[n,r,f] timeout[r,f] rm[r,f]"},
		{"env -S 'rm -rf' /", "env[S] rm[r,f]"},
		{"command rm -rf /", "command[r,f] rm[r,f]"},
		{"exec rm -rf /", "exec[r,f] rm[r,f]"},
		{"eval 'rm -rf /'", "eval rm[r,f]"},
		{"eval \"$CMD\"", "eval*"},
		{"{rm,-rf} /", "rm[r,f]"},
		{"r{m,} -rf /", "rm[r,f]"},
		{"/bin/r? -rf /", "*[r,f]"},
		{"find . -name x -exec rm -rf {} \\;", "find[n,a,m,e,e,x,e,c,r,f] rm[r,f]"},
		{"sh -c 'sh -c \"rm -rf /\"'", "sh[c] sh[c] rm[r,f]"},
		{"ls >/etc/passwd", "ls"},
		{"rm 'unterminated", " !parse"},
		{"", ""},
	} {
		t.Run(tc.script, func(t *testing.T) {
			got := summary(FromScript(tc.script))
			if strings.TrimSpace(got) != strings.TrimSpace(tc.want) {
				t.Errorf("FromScript(%q) = %q, want %q", tc.script, got, tc.want)
			}
		})
	}
}

func TestFromArgv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"rm", "-rf", "/"}, "rm[r,f]"},
		{[]string{"/bin/sh", "-c", "rm -rf /"}, "sh[c] rm[r,f]"},
		{[]string{"bash", "-o", "pipefail", "-c", "cat x | rm -rf y"}, "bash[o,c] cat rm[r,f]"},
		{[]string{"sh", "script.sh"}, "sh"},
		{[]string{"sh"}, "sh*"},
		{[]string{"env", "rm", "-rf"}, "env[r,f] rm[r,f]"},
		{[]string{"rm", "--", "-rf"}, "rm"},
		{[]string{"ls", "$(rm -rf /)"}, "ls"}, // argv is not a script
	} {
		got := summary(FromArgv(tc.argv))
		if got != tc.want {
			t.Errorf("FromArgv(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

func TestRedirectsAndEnv(t *testing.T) {
	t.Parallel()
	f := FromScript("FOO=1 BAR=$X cmd a >/tmp/out 2>>log <in 2>&1; (echo a; echo b) >/etc/x")
	if f.ParseError != "" {
		t.Fatal(f.ParseError)
	}
	c := f.Commands[0]
	if c.Env["FOO"] != "1" || c.Env["BAR"] != "$X" {
		t.Errorf("env = %v", c.Env)
	}
	var got []string
	for _, r := range c.Redirects {
		got = append(got, fmt.Sprintf("%s%s w=%v r=%v", r.Op, r.Path, r.Write, r.Read))
	}
	want := []string{">/tmp/out w=true r=false", ">>log w=true r=false", "<in w=false r=true"}
	if !slices.Equal(got, want) {
		t.Errorf("redirects = %q, want %q", got, want)
	}
	for _, c := range f.Commands[1:] {
		if len(c.Redirects) != 1 || c.Redirects[0].Path != "/etc/x" || !c.Redirects[0].Write {
			t.Errorf("%s: redirects %+v, want the block's >/etc/x", c.Name, c.Redirects)
		}
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	deep := "rm -rf /"
	for range MaxDepth + 2 {
		q, err := quoteAll([]word{{lit: deep, static: true}})
		if err != nil {
			t.Fatal(err)
		}
		deep = "sh -c" + q
	}
	if f := FromScript(deep); f.ParseError == "" {
		t.Errorf("nesting beyond %d: no parse error", MaxDepth)
	}
	many := strings.Repeat("true;", MaxCommands+1)
	if f := FromScript(many); f.ParseError == "" || len(f.Commands) != MaxCommands {
		t.Errorf("%d commands: parse error %q, %d commands kept", MaxCommands+1, f.ParseError, len(f.Commands))
	}
	// A megabyte of here-document (an agent writing a file) still shows what follows it.
	big := "cat >f <<'EOF'\n" + strings.Repeat("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", (1<<20)/40) + "EOF\nrm -rf /"
	if f := FromScript(big); f.ParseError != "" || f.Commands[len(f.Commands)-1].Name != "rm" {
		t.Errorf("1 MiB script: parse error %q, %s", f.ParseError, summary(f))
	}
	if f := FromScript("echo \xff\xfe; rm -rf /"); f.ParseError == "" && summary(f) != "echo rm[r,f]" {
		t.Errorf("invalid UTF-8: %q", summary(f))
	}
	if f := FromScript("echo {1..100}{1..100}{1..100}"); f.ParseError != "" {
		t.Errorf("large brace expansion: %q", f.ParseError)
	}
}

func FuzzFromScript(f *testing.F) {
	for _, s := range []string{"rm -rf /", `bash -lc "rm -R -f /"`, "R=rm; $R -rf /", "x=$(a | b) && c >d",
		"bash <<'EOF'\nrm\nEOF", "env -S 'a b' c", "find . -exec rm {} +", "{a,b}{c,d}", "sudo -u x -- y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		facts := FromScript(s)
		if len(facts.Commands) > MaxCommands {
			t.Fatalf("%d commands", len(facts.Commands))
		}
		for _, c := range facts.Commands {
			if c.Depth > MaxDepth {
				t.Fatalf("depth %d", c.Depth)
			}
			if c.Dynamic && c.Name != "" && len(c.Via) == 0 && c.Depth == 0 && !isShell(c.Name) && c.Name != "eval" {
				if _, w := wrappers[c.Name]; !w {
					t.Fatalf("dynamic command with a name: %+v", c)
				}
			}
		}
	})
}

// Policy decides calls concurrently: FromScript shares nothing between
// calls (run with -race to see it).
func TestFromScriptConcurrent(t *testing.T) {
	t.Parallel()
	const script = `cd 'a b' && rm -rf "x"\ y; cat <<EOF
literal
EOF`
	want := FromScript(script)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got := FromScript(script); !reflect.DeepEqual(got, want) {
					t.Errorf("got %+v, want %+v", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
