// Package shellfacts reads shell scripts and argv as policy sees them: every
// simple command a script would run — in pipelines, lists, subshells,
// if/for/while bodies, functions, command and process substitutions, and
// the scripts of nested `sh -c`, `eval` and here-documents fed to a shell —
// with its resolved name, arguments, parsed flags, environment assignments
// and redirections.
//
// The parser is mvdan.cc/sh's, not a home-made one: spellings a person uses
// to dodge a string match (quoting, `$'\x72m'`, `/bin/rm`, `env`, `sudo`,
// `xargs`, `bash -lc`, brace expansion) all come out as the command they run.
// What cannot be known without running the script — a command name taken
// from a variable or a substitution, a shell reading its script from a
// pipe — is marked Dynamic, so a rule can refuse what it cannot see.
package shellfacts

import (
	"path"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Limits that keep the extraction bounded on hostile input. Exceeding one is
// a ParseError, which the default rules deny.
const (
	MaxDepth    = 8      // nested sh -c / eval / here-document scripts
	MaxCommands = 10_000 // simple commands in one call
)

// Facts are what one script or argv would run.
type Facts struct {
	Commands []Command
	// ParseError is set when the script (or a script nested in it) does not
	// parse or exceeds a limit; Commands then holds what was read before.
	ParseError string
}

// Command is one simple command.
type Command struct {
	Name      string            // basename of the program, after wrappers and quoting; "" when Dynamic
	Path      string            // the program as written, e.g. /bin/rm
	Args      []string          // the arguments after the program; non-literal ones as written ("$X")
	Flags     []string          // -rf → r, f; --force=yes → force; up to "--"
	Env       map[string]string // NAME=value assignments before it (and env's)
	Redirects []Redirect        // its own and those of the blocks around it
	Dynamic   bool              // the name, or the script a shell runs, is not a literal
	Via       []string          // wrappers it was found through: sudo, env, xargs, bash -c …
	Depth     int               // 0 for the top level, +1 per nested script
}

// Redirect is one redirection of a command.
type Redirect struct {
	Op    string // >, >>, <, <>, &>, >| …
	Path  string // the target as written (literal when it is one)
	Write bool   // the command writes (or truncates) Path
	Read  bool   // the command reads Path
}

// FromScript reads a shell script (exec's command string, Claude Code's
// Bash command).
func FromScript(script string) Facts {
	var x extractor
	x.script(script, 0, nil)
	return x.facts
}

// FromArgv reads an argv that is executed directly (no shell around it).
func FromArgv(argv []string) Facts {
	var x extractor
	if len(argv) > 0 {
		x.argv(word{lit: argv[0], static: true}, literalWords(argv[1:]), nil, nil, 0, nil)
	}
	return x.facts
}

type extractor struct {
	facts Facts
}

func (x *extractor) fail(msg string) {
	if x.facts.ParseError == "" {
		x.facts.ParseError = msg
	}
}

// word is one argument after brace expansion: its literal value when
// static, else its source text.
type word struct {
	lit    string
	static bool
}

func literalWords(ss []string) []word {
	ws := make([]word, len(ss))
	for i, s := range ss {
		ws[i] = word{lit: s, static: true}
	}
	return ws
}

// parsers are reused: a parser's buffers cost more than a short script.
var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

func (x *extractor) script(src string, depth int, via []string) {
	if depth > MaxDepth {
		x.fail("shell scripts nested deeper than " + strconv.Itoa(MaxDepth))
		return
	}
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	parsers.Put(p)
	if err != nil {
		x.fail(err.Error())
		return
	}
	for _, st := range f.Stmts {
		x.stmt(st, depth, via, nil)
	}
}

// stmt reads one statement; outer are the redirections of the blocks it sits in.
func (x *extractor) stmt(st *syntax.Stmt, depth int, via []string, outer []Redirect) {
	redirs := append(outer[:len(outer):len(outer)], redirects(st.Redirs)...)
	for _, r := range st.Redirs {
		x.words(depth, via, r.Word)
	}
	switch c := st.Cmd.(type) {
	case *syntax.CallExpr:
		x.call(c, st.Redirs, redirs, depth, via)
	case nil:
	default:
		// A compound command: its statements inherit its redirections; any
		// other node (a test, arithmetic, a for-loop's items) is searched
		// for substitutions.
		syntax.Walk(c, func(n syntax.Node) bool {
			if st, ok := n.(*syntax.Stmt); ok {
				x.stmt(st, depth, via, redirs)
				return false
			}
			return !x.subst(n, depth, via)
		})
	}
}

// subst reads the statements of a command or process substitution and
// reports whether n was one.
func (x *extractor) subst(n syntax.Node, depth int, via []string) bool {
	var stmts []*syntax.Stmt
	switch n := n.(type) {
	case *syntax.CmdSubst:
		stmts = n.Stmts
	case *syntax.ProcSubst:
		stmts = n.Stmts
	default:
		return false
	}
	for _, st := range stmts {
		x.stmt(st, depth, via, nil)
	}
	return true
}

// words searches words for command and process substitutions.
func (x *extractor) words(depth int, via []string, ws ...*syntax.Word) {
	for _, w := range ws {
		if w == nil || plain(w) {
			continue
		}
		syntax.Walk(w, func(n syntax.Node) bool { return !x.subst(n, depth, via) })
	}
}

func (x *extractor) call(c *syntax.CallExpr, own []*syntax.Redirect, redirs []Redirect, depth int, via []string) {
	var env map[string]string
	if len(c.Assigns) > 0 {
		env = make(map[string]string, len(c.Assigns))
	}
	for _, a := range c.Assigns {
		if a.Name == nil {
			continue
		}
		if a.Value != nil {
			x.words(depth, via, a.Value)
			env[a.Name.Value] = render(a.Value).lit
		} else {
			env[a.Name.Value] = ""
		}
		if a.Array != nil {
			syntax.Walk(a.Array, func(n syntax.Node) bool {
				if w, ok := n.(*syntax.Word); ok {
					x.words(depth, via, w)
					return false
				}
				return true
			})
		}
	}
	x.words(depth, via, c.Args...)
	var args []word
	for _, w := range c.Args {
		args = append(args, expandWord(w)...)
	}
	if len(args) == 0 {
		return // assignments only
	}
	x.argv(args[0], args[1:], env, redirs, depth, via, own...)
}

// argv records one command and follows it through wrappers and shells.
// hdocs are the command's own redirections, searched for a script fed to a
// shell on its standard input.
func (x *extractor) argv(name word, args []word, env map[string]string, redirs []Redirect, depth int, via []string, hdocs ...*syntax.Redirect) {
	if len(x.facts.Commands) >= MaxCommands {
		x.fail("more than " + strconv.Itoa(MaxCommands) + " commands")
		return
	}
	c := Command{Path: name.lit, Args: lits(args), Env: env, Redirects: redirs, Via: via, Depth: depth}
	if name.static && !hasGlob(name.lit) {
		c.Name = path.Base(name.lit)
		if name.lit == "" {
			c.Name = ""
		}
	} else {
		c.Dynamic = true
	}
	c.Flags = flags(args)
	x.facts.Commands = append(x.facts.Commands, c)
	if c.Dynamic {
		return
	}
	idx := len(x.facts.Commands) - 1
	next := append(via[:len(via):len(via)], c.Name)

	if isShell(c.Name) {
		x.shell(idx, args, depth, next, hdocs)
		return
	}
	switch c.Name {
	case "eval":
		var parts []string
		for _, a := range args {
			if !a.static {
				x.facts.Commands[idx].Dynamic = true
				return
			}
			parts = append(parts, a.lit)
		}
		x.script(strings.Join(parts, " "), depth+1, next)
		return
	case "find":
		x.findExec(args, depth, next)
		return
	}
	w, ok := wrappers[c.Name]
	if !ok {
		return
	}
	i, wenv, split := w(args)
	switch {
	case split != nil:
		// env -S 'cmd args': a command line inside one argument.
		if !split.static {
			x.facts.Commands[idx].Dynamic = true
			return
		}
		rest, err := quoteAll(args[i:])
		if err != nil {
			x.facts.Commands[idx].Dynamic = true
			return
		}
		x.script(split.lit+rest, depth, next)
	case i < 0:
		// A wrapper whose target could not be found among its options.
		x.facts.Commands[idx].Dynamic = true
	case i < len(args):
		x.argv(args[i], args[i+1:], mergeEnv(env, wenv), redirs, depth, next, hdocs...)
	case c.Name == "xargs":
		// xargs with no command runs echo.
		x.argv(word{lit: "echo", static: true}, nil, nil, redirs, depth, next)
	}
}

func mergeEnv(a, b map[string]string) map[string]string {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	m := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// shell follows `sh -c SCRIPT`, a here-document or here-string fed to a
// shell, and marks a shell reading a script from a pipe as Dynamic.
func (x *extractor) shell(idx int, args []word, depth int, via []string, hdocs []*syntax.Redirect) {
	script, file, ok := shellScript(args)
	switch {
	case !ok:
		x.facts.Commands[idx].Dynamic = true
	case script != nil:
		if !script.static {
			x.facts.Commands[idx].Dynamic = true
			return
		}
		x.script(script.lit, depth+1, via)
	case file:
		// sh FILE runs a file policy cannot see, like ./FILE does.
	default:
		for _, r := range hdocs {
			var body *syntax.Word
			switch r.Op {
			case syntax.Hdoc, syntax.DashHdoc:
				body = r.Hdoc
			case syntax.WordHdoc:
				body = r.Word
			default:
				continue
			}
			if body == nil {
				x.script("", depth+1, via)
				return
			}
			s, static := docLiteral(body, r.Op != syntax.WordHdoc)
			if !static {
				x.facts.Commands[idx].Dynamic = true
				return
			}
			x.script(s, depth+1, via)
			return
		}
		// No script on the command line: the shell runs whatever arrives on
		// its standard input (`curl … | sh`).
		x.facts.Commands[idx].Dynamic = true
	}
}

// shellScript finds the script of a shell's argv: the argument after the
// options when -c is among them, or a script file. ok is false when an
// option's meaning is unknown.
func shellScript(args []word) (script *word, file, ok bool) {
	hasC := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static {
			return nil, false, false
		}
		s := a.lit
		switch {
		case s == "--" || s == "-":
			i++
			if hasC && i < len(args) {
				return &args[i], false, true
			}
			return nil, i < len(args), true
		case s == "-o" || s == "+o" || s == "-O" || s == "+O" || s == "--rcfile" || s == "--init-file":
			i++ // takes an argument
		case strings.HasPrefix(s, "--"):
			// --login, --norc, --posix …
		case len(s) > 1 && (s[0] == '-' || s[0] == '+'):
			if strings.ContainsRune(s[1:], 'c') {
				hasC = true
			}
			if strings.ContainsAny(s[1:], "oO") {
				i++ // -eo pipefail
			}
		default:
			if hasC {
				return &args[i], false, true
			}
			return nil, true, true
		}
	}
	return nil, false, !hasC
}

// findExec follows find's -exec/-execdir/-ok/-okdir commands.
func (x *extractor) findExec(args []word, depth int, via []string) {
	for i := 0; i < len(args); i++ {
		switch args[i].lit {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		j := i + 1
		for j < len(args) && args[j].lit != ";" && args[j].lit != "+" {
			j++
		}
		if i+1 < j {
			x.argv(args[i+1], args[i+2:j], nil, nil, depth, via)
		}
		i = j
	}
}

var shells = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true,
	"ash": true, "rbash": true, "yash": true, "posh": true, "fish": true,
}

func isShell(name string) bool { return shells[name] }

func lits(ws []word) []string {
	if len(ws) == 0 {
		return nil
	}
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.lit
	}
	return out
}

// quoteAll renders literal words back into shell text, each quoted.
func quoteAll(ws []word) (string, error) {
	var b strings.Builder
	for _, w := range ws {
		q, err := syntax.Quote(w.lit, syntax.LangBash)
		if err != nil {
			return "", err
		}
		b.WriteByte(' ')
		b.WriteString(q)
	}
	return b.String(), nil
}

// flags parses short and long flags up to "--": -rf → r, f; --force=x → force.
func flags(args []word) []string {
	var out []string
	for _, a := range args {
		s := a.lit
		if !a.static {
			continue
		}
		if s == "--" {
			break
		}
		switch {
		case strings.HasPrefix(s, "--") && len(s) > 2:
			name, _, _ := strings.Cut(s[2:], "=")
			out = append(out, name)
		case len(s) > 1 && s[0] == '-':
			for _, r := range s[1:] {
				out = append(out, string(r))
			}
		}
	}
	return out
}

func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// expandWord brace-expands a word ({a,b}c → ac bc, as bash does) and gives
// each result's literal value, or its source text when it is not static.
func expandWord(w *syntax.Word) []word {
	if !syntax.SplitBraces(w) {
		return []word{render(w)}
	}
	var out []word
	for bw, err := range expand.BracesSeq(nil, w) {
		if err != nil {
			// An expansion too large to list: bash would run something,
			// but not something a rule can see.
			return []word{{lit: source(w)}}
		}
		out = append(out, render(bw))
	}
	return out
}

// render returns a word's literal value when it has one (quotes removed,
// $'…' escapes decoded), else its source text.
func render(w *syntax.Word) word {
	if len(w.Parts) == 1 {
		// The common words need no expansion machinery.
		switch p := w.Parts[0].(type) {
		case *syntax.Lit:
			if !strings.ContainsAny(p.Value, "\\~") {
				return word{lit: p.Value, static: true}
			}
		case *syntax.SglQuoted:
			if !p.Dollar {
				return word{lit: p.Value, static: true}
			}
		}
	}
	if !static(w.Parts) {
		return word{lit: source(w)}
	}
	// Fields, not Literal: only Fields removes backslash escapes (\' → ').
	fs, err := expand.Fields(literalConfig(), w)
	if err != nil {
		return word{lit: source(w)}
	}
	return word{lit: strings.Join(fs, ""), static: true}
}

// docLiteral is a here-document's text when it needs no expansion.
func docLiteral(w *syntax.Word, heredoc bool) (string, bool) {
	if !static(w.Parts) {
		return "", false
	}
	var s string
	var err error
	if heredoc {
		s, err = expand.Document(literalConfig(), w)
	} else {
		s, err = expand.Literal(literalConfig(), w)
	}
	return s, err == nil
}

// literalConfig expands nothing but quoting: a static word has no variables,
// and ~ stays ~ (HOME is not known here). A new one each time: expand
// writes into the config it is given, and calls are decided concurrently
// (a shared one was a data race, found once the tests ran in parallel).
func literalConfig() *expand.Config {
	return &expand.Config{Env: literalEnv}
}

var literalEnv = expand.FuncEnviron(func(name string) string {
	if name == "HOME" {
		return "~"
	}
	return ""
})

// plain reports whether a word is literals and single quotes only: no
// substitution can hide in it.
func plain(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		default:
			return false
		}
	}
	return true
}

// static reports whether word parts are literals and quotes only.
func static(parts []syntax.WordPart) bool {
	for _, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.DblQuoted:
			if !static(p.Parts) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func source(w *syntax.Word) string {
	var b strings.Builder
	_ = syntax.NewPrinter().Print(&b, w)
	return b.String()
}

func redirects(rs []*syntax.Redirect) []Redirect {
	var out []Redirect
	for _, r := range rs {
		var rd Redirect
		rd.Op = r.Op.String()
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob, syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
			rd.Write = true
		case syntax.RdrIn:
			rd.Read = true
		case syntax.RdrInOut:
			rd.Read, rd.Write = true, true
		case syntax.DplOut, syntax.DplIn:
			// >&2, <&0: a descriptor, unless it names a file (bash: >&file).
			if r.Word == nil || isFD(r.Word) {
				continue
			}
			rd.Write = r.Op == syntax.DplOut
			rd.Read = r.Op == syntax.DplIn
		default:
			continue // here-documents and here-strings name no file
		}
		if r.Word != nil {
			rd.Path = render(r.Word).lit
		}
		out = append(out, rd)
	}
	return out
}

func isFD(w *syntax.Word) bool {
	s := w.Lit()
	if s == "-" {
		return true
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
