package model

// Estimating what an answer used, for answers whose usage never arrived:
// the client hung up and the upstream did not finish within the door's
// bounds, the stream was cut, the answer was unreadable. The provider
// bills such answers all the same, so a budget charges an estimate rather
// than nothing; it errs high.
const (
	// BytesPerToken turns a request body's size into input tokens when the
	// answer did not report them: text and JSON run at about four bytes
	// a token.
	BytesPerToken = 4
	// UnsetOutputTokens is the output charged for a request that set no
	// output limit (OpenAI's are optional).
	UnsetOutputTokens = 32000
)

// Estimate is the usage charged for an answer whose usage did not arrive
// whole. seen is what it reported before it stopped (Anthropic reports the
// input first); the input is that, else a token per BytesPerToken bytes of
// the request body; the output is the request's limit, or what was seen
// if more.
func Estimate(f Facts, bodyBytes int, seen Usage) Usage {
	u := seen
	if u.Input+u.CacheRead+u.CacheWrite == 0 {
		u.Input = int64(bodyBytes+BytesPerToken-1) / BytesPerToken
	}
	limit := f.MaxTokens
	if limit == 0 {
		limit = UnsetOutputTokens
	}
	u.Output = max(u.Output, limit)
	return u
}
