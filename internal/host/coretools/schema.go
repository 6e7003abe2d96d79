package coretools

// JSON Schemas (draft 2020-12) of the core tools' arguments, for doors that
// advertise tools (MCP) and for documentation. The tools themselves validate
// with the same rules; schema_test.go keeps the two in step.

// ReadSchema describes `read` arguments.
const ReadSchema = `{
  "type": "object",
  "description": "Read a file in the sandbox. Text is returned by lines; binary files need encoding base64.",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path; relative paths are relative to the workspace."},
    "offset": {"type": "integer", "minimum": 1, "description": "First line to return, 1-based (default 1)."},
    "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to return (default: to the end, up to the read cap)."},
    "encoding": {"type": "string", "enum": ["utf-8", "base64", "raw"], "description": "utf-8 (default) refuses binary files; base64 returns any file whole; raw streams it as bytes (only where the caller takes a byte stream: the admin API with Accept: application/octet-stream)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

// WriteSchema describes `write` arguments.
const WriteSchema = `{
  "type": "object",
  "description": "Create or atomically replace a file in the sandbox, creating parent directories.",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path; relative paths are relative to the workspace."},
    "content": {"type": "string", "description": "The whole new content."},
    "encoding": {"type": "string", "enum": ["utf-8", "base64"], "description": "How content is encoded (default utf-8)."},
    "size": {"type": "integer", "minimum": 0, "description": "Only for content sent as a raw request body (the admin API): its byte count, instead of content."},
    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "Only with size: the raw body's SHA-256 in hex; the file is replaced only when the body matches."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

// PatchSchema describes `patch` arguments: old/new or diff.
const PatchSchema = `{
  "type": "object",
  "description": "Edit a file in the sandbox: replace old (which must occur exactly once) with new, or apply a unified diff strictly. On any error the file is unchanged.",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path; relative paths are relative to the workspace."},
    "old": {"type": "string", "minLength": 1, "description": "Exact text to replace; must occur exactly once."},
    "new": {"type": "string", "description": "Replacement text (\"\" deletes)."},
    "diff": {"type": "string", "description": "A unified diff of this one file; every hunk's context must match exactly at its line numbers."}
  },
  "required": ["path"],
  "oneOf": [
    {"required": ["old", "new"], "not": {"required": ["diff"]}},
    {"required": ["diff"], "not": {"anyOf": [{"required": ["old"]}, {"required": ["new"]}]}}
  ],
  "additionalProperties": false
}`

// ExecSchema describes `exec` arguments: command or argv.
const ExecSchema = `{
  "type": "object",
  "description": "Run a process in the sandbox. command runs as /bin/sh -c command; argv runs as given. stdout and stderr are returned separately, each capped with a visible marker.",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "A shell command line, run by /bin/sh -c."},
    "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Program and arguments, run without a shell."},
    "cwd": {"type": "string", "description": "Working directory; relative to the workspace (default: the workspace)."},
    "env": {"type": "object", "additionalProperties": {"type": "string"}, "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "description": "Extra environment variables."},
    "secretEnv": {"type": "object", "additionalProperties": {"type": "string"}, "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "description": "Operator only (toolgate run/exec --secret-env on the host): variables set from host secrets, by secret name. Refused from inside a sandbox."},
    "stdin": {"type": "string", "description": "Text fed to the process's standard input."},
    "timeout": {"type": ["string", "number"], "description": "A Go duration (\"30s\", \"2m\") or seconds; capped by the agent's exec timeout, which is also the default."}
  },
  "oneOf": [
    {"required": ["command"], "not": {"required": ["argv"]}},
    {"required": ["argv"], "not": {"required": ["command"]}}
  ],
  "additionalProperties": false
}`

// Schema returns the tool's argument schema, for doors that advertise tools.
func (*Read) Schema() string  { return ReadSchema }
func (*Write) Schema() string { return WriteSchema }
func (*Patch) Schema() string { return PatchSchema }
func (*Exec) Schema() string  { return ExecSchema }
