# SIMULATOR library sourced by the guest stand-ins in this directory. They are no NVIDIA
# software: `vgpu sim up`'s guests and the SSH test lab copy these files onto a lab user's PATH so that provisioning steps that
# need a GPU, an NVIDIA driver or a package mirror have something to talk to. All state lives
# under the lab user's home (found from the script's own location, so it works under sudo).
# Parameter expansion instead of dirname/cd subshells: these run on every simulated
# command, and forks are what a 16-host fan-out on two cores pays for.
SIM_BIN=${0%/*}
SIM_HOME=${SIM_BIN%/*}
SIM_STATE="$SIM_HOME/.gpu-sim"
SIM_ROOT="$SIM_HOME/sysroot"
[ -d "$SIM_STATE/services" ] || /usr/bin/mkdir -p "$SIM_STATE/packages" "$SIM_STATE/services" \
    2>/dev/null || true

sim_get() {  # sim_get KEY -> value from the hardware file, empty when unset
    sed -n "s/^$1=//p" "$SIM_STATE/hardware" 2>/dev/null | head -n 1
}
sim_write() {  # sim_write FILE VALUE, atomically
    printf '%s\n' "$2" > "$1.tmp.$$" && /usr/bin/mv -f "$1.tmp.$$" "$1"
}
sim_installed() { [ -e "$SIM_STATE/packages/$1" ]; }
sim_delay() {  # sleeps for the seconds written in .gpu-sim/delay-NAME, if any
    if [ -f "$SIM_STATE/delay-$1" ]; then
        touch "$SIM_STATE/started-$1"
        sleep "$(cat "$SIM_STATE/delay-$1")"
    fi
}

# Lab guard: commands that write files refuse, when run as root, any absolute path outside
# this lab host's home, so a wrong system root can never touch the real machine.
sim_guard_paths() {  # sim_guard_paths TOOL ARG...
    tool=$1; shift
    [ "$(id -u)" = 0 ] || return 0
    for a in "$@"; do
        case "$a" in
            -*) ;;
            /dev/null) ;;
            "$SIM_HOME"/*) ;;
            /*) echo "lab guard: $tool refuses $a (outside $SIM_HOME)" >&2; exit 97 ;;
        esac
    done
}

# The loaded nvidia.ko: .gpu-sim/nvidia-module holds the version loaded ("" = unloaded);
# without that file a boot has loaded the installed driver's module, if any.
sim_module_version() {
    if [ -e "$SIM_STATE/nvidia-module" ]; then cat "$SIM_STATE/nvidia-module"
    else cat "$SIM_STATE/driver_version" 2>/dev/null; fi
}
