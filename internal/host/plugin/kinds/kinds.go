// Package kinds lists every plugin kind in one file. Kinds register
// themselves from init(), so a kind whose package nothing imports would
// silently vanish from plugin.Build; whatever builds plugins imports this
// package instead, and a new kind is one line here.
package kinds

import (
	_ "github.com/toolgate/toolgate/internal/host/plugin"   // command, builtin
	_ "github.com/toolgate/toolgate/internal/host/upstream" // mcp
)
