# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_pptune_global_optspecs
    string join \n config= h/help V/version
end

function __fish_pptune_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_pptune_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_pptune_using_subcommand
    set -l cmd (__fish_pptune_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c pptune -n "__fish_pptune_needs_command" -l config -d 'Policy file or directory, for the commands that read the policy (run, plan, check, record, replay, status)' -r -F
complete -c pptune -n "__fish_pptune_needs_command" -s h -l help -d 'Print help'
complete -c pptune -n "__fish_pptune_needs_command" -s V -l version -d 'Print version'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "run" -d 'Run the daemon in the foreground (the systemd unit runs this)'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "status" -d 'Show page pools, queues, rings and channels, and the running daemon\'s view'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "plan" -d 'Sample the live kernel as often as the policy needs for a finding and print what `run` would do, and why. Changes nothing'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "check" -d 'Validate the policy: exit 0 when valid, 78 (EX_CONFIG) otherwise'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "verify" -d 'Check that the live rings/channels still hold the values pptune set: exit 0 when they do (or pptune set nothing it still owns), 2 when one differs, listing it. For configuration management and compliance'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "export" -d 'Print the values pptune set, per device, as a systemd `.link` file, a NetworkManager fragment or a TuneD profile fragment, to make them permanent and turn enforcement off'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "restore" -d 'Put back the original rings/channels pptune recorded, and clear the record'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "record" -d 'Record what the kernel reports, every policy interval, into one recording file (see recording.md in the documentation), for a host that runs no daemon'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "replay" -d 'Run the policy over a recording (a file, or the daemon\'s recording directory) and print what it would have decided; changes nothing'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "fleet" -d 'Fleet mode: what the fleet\'s Prometheus knows, for every host'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "history" -d 'Every change pptune made, with its evidence and outcome, across restarts (the change journal in the state directory)'
complete -c pptune -n "__fish_pptune_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c pptune -n "__fish_pptune_using_subcommand run" -l config -d 'Policy file or directory (default: $CONFIGURATION_DIRECTORY or /etc/pptune; the embedded default policy when none exists)' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand run" -l metrics-listen -d 'Prometheus listen address, `address:port` or `:port` for every address (overrides the policy\'s daemon.metrics_listen; default 127.0.0.1:9864)' -r
complete -c pptune -n "__fish_pptune_using_subcommand run" -l web-config-file -d 'TLS and basic auth for the metrics endpoint: a web config file in the Prometheus exporter-toolkit format (node_exporter\'s --web.config.file); overrides daemon.metrics_web_config' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand run" -l log-format -d 'Log format' -r -f -a "auto\t'journald when stderr is the journal (under systemd), readable text on a terminal, JSON lines otherwise'
human\t'Readable text'
json\t'One JSON object per line'
journald\t'Native journald fields (needs the journal socket)'"
complete -c pptune -n "__fish_pptune_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand status" -s i -l interface -d 'Only this interface (repeatable)' -r
complete -c pptune -n "__fish_pptune_using_subcommand status" -l config -d 'Policy file or directory (default: $CONFIGURATION_DIRECTORY or /etc/pptune; the embedded default policy when none exists)' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand status" -l json -d 'JSON for scripts instead of text: one line when stdout is a pipe or a file, indented when it is a terminal'
complete -c pptune -n "__fish_pptune_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand plan" -l config -d 'Policy file or directory (default: $CONFIGURATION_DIRECTORY or /etc/pptune; the embedded default policy when none exists)' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand plan" -l json -d 'JSON for scripts instead of text: one line when stdout is a pipe or a file, indented when it is a terminal'
complete -c pptune -n "__fish_pptune_using_subcommand plan" -l detailed-exitcode -d 'Exit 2 when `run` would change something (0 when it would hold everything), like `terraform plan -detailed-exitcode`'
complete -c pptune -n "__fish_pptune_using_subcommand plan" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand check" -l config -d 'Policy file or directory (default: $CONFIGURATION_DIRECTORY or /etc/pptune; the embedded default policy when none exists)' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand verify" -s i -l interface -d 'Only this interface (repeatable)' -r
complete -c pptune -n "__fish_pptune_using_subcommand verify" -l json -d 'JSON for scripts instead of text: one line when stdout is a pipe or a file, indented when it is a terminal'
complete -c pptune -n "__fish_pptune_using_subcommand verify" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand export" -l format -r -f -a "systemd-link\t'A `.link` file per device for `/etc/systemd/network/`'
networkmanager\t'A NetworkManager keyfile `[ethtool]` fragment and the `nmcli` command'
tuned\t'A TuneD profile fragment (one `[net]`-type section per device)'"
complete -c pptune -n "__fish_pptune_using_subcommand export" -s i -l interface -d 'Only this interface (repeatable)' -r
complete -c pptune -n "__fish_pptune_using_subcommand export" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand restore" -s i -l interface -d 'Only this interface (repeatable)' -r
complete -c pptune -n "__fish_pptune_using_subcommand restore" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand record" -l config -d 'Policy file or directory (default: $CONFIGURATION_DIRECTORY or /etc/pptune; the embedded default policy when none exists)' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand record" -l duration -d 'How long (e.g. 10m, 24h; default: until interrupted)' -r
complete -c pptune -n "__fish_pptune_using_subcommand record" -s o -l output -d 'The file to write (default: pptune-<time>.pptrec here)' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand record" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand replay" -l config -d 'Policy file or directory (default: $CONFIGURATION_DIRECTORY or /etc/pptune; the embedded default policy when none exists)' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand replay" -l against -d 'A second policy: print the difference between the two' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand replay" -l since -d 'Only passes since then: a duration ago (24h) or an RFC 3339 time' -r
complete -c pptune -n "__fish_pptune_using_subcommand replay" -l until -d 'Only passes until then: a duration ago (1h) or an RFC 3339 time' -r
complete -c pptune -n "__fish_pptune_using_subcommand replay" -s i -l interface -d 'Only this interface (repeatable)' -r
complete -c pptune -n "__fish_pptune_using_subcommand replay" -l series -d 'Print one row per pass and device (time, ring, decision, recycle-miss and slow-refill share; B\'s too with --against) instead of the summary' -r -f -a "jsonl\t'One JSON object per line'
csv\t'Comma-separated values with a header line (RFC 4180)'"
complete -c pptune -n "__fish_pptune_using_subcommand replay" -l plot -d 'Also draw, per device, the RX ring and the recycle-miss share over time (A and B with --against) into FILE, an SVG image' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand replay" -l json -d 'JSON for scripts instead of text: one line when stdout is a pipe or a file, indented when it is a terminal'
complete -c pptune -n "__fish_pptune_using_subcommand replay" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and not __fish_seen_subcommand_from suggest help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and not __fish_seen_subcommand_from suggest help" -f -a "suggest" -d 'Write a policy drop-in of starting rings per device class (driver, model, firmware, MTU, link speed) from the rings the fleet\'s hosts converged to, with the evidence in comments. Reads Prometheus; changes nothing else'
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and not __fish_seen_subcommand_from suggest help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and __fish_seen_subcommand_from suggest" -l prometheus -d 'The Prometheus (or Thanos/Mimir query) base URL, e.g. http://prometheus:9090; host:port alone means http://host:port' -r
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and __fish_seen_subcommand_from suggest" -l since -d 'How far back to look (at most 720h)' -r
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and __fish_seen_subcommand_from suggest" -l min-hosts -d 'Hosts a class needs for a prior; fewer get none' -r
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and __fish_seen_subcommand_from suggest" -l selector -d 'The label matchers that pick pptune\'s series' -r
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and __fish_seen_subcommand_from suggest" -s o -l output -d 'The drop-in to write (default: standard output); written only when the query succeeded' -r -F
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and __fish_seen_subcommand_from suggest" -s h -l help -d 'Print help'
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and __fish_seen_subcommand_from help" -f -a "suggest" -d 'Write a policy drop-in of starting rings per device class (driver, model, firmware, MTU, link speed) from the rings the fleet\'s hosts converged to, with the evidence in comments. Reads Prometheus; changes nothing else'
complete -c pptune -n "__fish_pptune_using_subcommand fleet; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c pptune -n "__fish_pptune_using_subcommand history" -l since -d 'Only changes since then: a duration ago (24h) or an RFC 3339 time' -r
complete -c pptune -n "__fish_pptune_using_subcommand history" -s i -l interface -d 'Only this interface (repeatable)' -r
complete -c pptune -n "__fish_pptune_using_subcommand history" -l json -d 'JSON for scripts instead of text: one line when stdout is a pipe or a file, indented when it is a terminal'
complete -c pptune -n "__fish_pptune_using_subcommand history" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "run" -d 'Run the daemon in the foreground (the systemd unit runs this)'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "status" -d 'Show page pools, queues, rings and channels, and the running daemon\'s view'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "plan" -d 'Sample the live kernel as often as the policy needs for a finding and print what `run` would do, and why. Changes nothing'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "check" -d 'Validate the policy: exit 0 when valid, 78 (EX_CONFIG) otherwise'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "verify" -d 'Check that the live rings/channels still hold the values pptune set: exit 0 when they do (or pptune set nothing it still owns), 2 when one differs, listing it. For configuration management and compliance'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "export" -d 'Print the values pptune set, per device, as a systemd `.link` file, a NetworkManager fragment or a TuneD profile fragment, to make them permanent and turn enforcement off'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "restore" -d 'Put back the original rings/channels pptune recorded, and clear the record'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "record" -d 'Record what the kernel reports, every policy interval, into one recording file (see recording.md in the documentation), for a host that runs no daemon'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "replay" -d 'Run the policy over a recording (a file, or the daemon\'s recording directory) and print what it would have decided; changes nothing'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "fleet" -d 'Fleet mode: what the fleet\'s Prometheus knows, for every host'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "history" -d 'Every change pptune made, with its evidence and outcome, across restarts (the change journal in the state directory)'
complete -c pptune -n "__fish_pptune_using_subcommand help; and not __fish_seen_subcommand_from run status plan check verify export restore record replay fleet history help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c pptune -n "__fish_pptune_using_subcommand help; and __fish_seen_subcommand_from fleet" -f -a "suggest" -d 'Write a policy drop-in of starting rings per device class (driver, model, firmware, MTU, link speed) from the rings the fleet\'s hosts converged to, with the evidence in comments. Reads Prometheus; changes nothing else'
