package provider

import (
	"os"
	"strings"
)

// Environment variables that set the log levels of the provider's own logger
// (tflog: TF_LOG_PROVIDER_ and the provider's type) and of the SDK's (the
// framework, terraform-plugin-go's protocol layer and their root).
var providerLogLevelVars = []string{
	"TF_LOG_PROVIDER_ALLOT",
	"TF_LOG_SDK",
	"TF_LOG_SDK_FRAMEWORK",
	"TF_LOG_SDK_PROTO",
}

// SilenceUnreadLogs turns the provider's logs off when nobody asked for
// them: when no TF_LOG* variable is set, Terraform discards every log line
// its providers send. The SDK's loggers default to TRACE regardless, so
// without this the provider formats a dozen JSON lines for every resource of
// every plan and Terraform parses each only to drop it: at 1 000 resources,
// more than a third of the provider's CPU time and a share of Terraform's.
// With any TF_LOG* variable set, nothing changes. The main function calls it
// before serving; it returns the variables it set.
func SilenceUnreadLogs() []string {
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TF_LOG") && value != "" {
			return nil
		}
	}
	set := make([]string, 0, len(providerLogLevelVars))
	for _, name := range providerLogLevelVars {
		if os.Setenv(name, "OFF") == nil {
			set = append(set, name)
		}
	}
	return set
}
