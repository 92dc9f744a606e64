package cli

import (
	"github.com/spf13/cobra"
)

func newCompletionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "print a shell completion script",
		Long: `Prints the script that completes leaseside's subcommands and flags in bash,
zsh or fish. The packages install them (bash-completion, zsh's
site-functions, fish's vendor_completions.d); to load one by hand, source it.`,
		Example: `  leaseside completion bash > /etc/bash_completion.d/leaseside
  leaseside completion zsh > "${fpath[1]}/_leaseside"
  leaseside completion fish > ~/.config/fish/completions/leaseside.fish
  source <(leaseside completion bash)`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      exactArgs("SHELL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(e.stdout, true)
			case "zsh":
				return root.GenZshCompletion(e.stdout)
			case "fish":
				return root.GenFishCompletion(e.stdout, true)
			}
			return usagef("unknown shell %q: want bash, zsh or fish", args[0])
		},
	}
}
