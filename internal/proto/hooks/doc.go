// Package hooks is the transport-free half of toolgate's Claude Code
// integration (reference: Claude Code 2.1.328's hook protocol). It parses
// hook input, renders the gate's answer in the only shape the CLI honours,
// writes the settings document that registers gate and tap, and spools tap
// events that could not be delivered. It does no I/O beyond the reader,
// writer or directory it is given, and links into the in-sandbox client, so
// it imports nothing of the gateway's: mapping input onto calls and
// ingesting stream-json transcripts is hookcall's, on the host.
//
// The gate (toolgate-client hook pre-tool-use), in outline:
//
//	in, err := hooks.ParseInput(os.Stdin, 0)
//	dec := hooks.DenyInternal(err)            // fail closed on bad input
//	if err == nil {
//		dec, err = askGateway(ctx, in)         // the transport: not here
//		if err != nil {
//			dec = hooks.DenyInternal(err)
//		}
//	}
//	os.Stdout.Write(hooks.RenderPreToolUse(dec)) // exit 0, nothing else on stdout
//
// The gateway side maps the same input with hookcall.ToCall and decides the call with
// its policy; the audit keeps AuditArgs(call.Tool, call.Args) (file bodies as
// sizes). The tap maps post events the same way, always exits 0 and prints
// nothing; when the gateway is unreachable it puts Event{ID: EventID(in),
// Body: raw input} into a Spool and a later run Drains it. Receivers
// deduplicate on the event id.
//
// Settings come from MergeSettings alone, so the gate, the tap and any hooks
// the user already has live in one document.
package hooks
