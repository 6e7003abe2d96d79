package model

import "encoding/json"

// SpentOf reads the Spent a call recorded: the value itself on a live
// call, its JSON form in an entry read back from the audit log.
func SpentOf(v any) (Spent, bool) {
	switch s := v.(type) {
	case Spent:
		return s, true
	case *Spent:
		return *s, s != nil
	case map[string]any:
		raw, err := json.Marshal(s)
		var out Spent
		if err == nil && json.Unmarshal(raw, &out) == nil {
			return out, true
		}
	}
	return Spent{}, false
}
