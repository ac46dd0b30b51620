#!/bin/bash
# A throwaway standalone ZooKeeper from Debian's package, for demos and benchmarks.
#
#   scripts/zk-server.sh start DIR   start a server with its data in DIR (created), on a free
#                                    127.0.0.1 port; wait until it answers `ruok` with `imok`
#                                    and `srvr` with a mode (it serves requests); write
#                                    DIR/connect (host:port) and DIR/pid.
#   scripts/zk-server.sh stop DIR    stop that server (TERM, then KILL) and remove DIR.
#   scripts/zk-server.sh start-ensemble DIR
#                                    start a 3-node ensemble, its servers in DIR/s1..s3, and
#                                    wait until each serves as leader or follower; write
#                                    DIR/connect (all three), DIR/follower and DIR/leader
#                                    (host:port of one follower and of the leader).  `stop DIR`
#                                    stops all three.
#
# Callers must `trap '... stop DIR' EXIT`. As a second line of defence `start` leaves a
# watchdog that stops the server when the process that ran `start` (its parent, or the pid in
# ZK_SERVER_OWNER) disappears, so even a SIGKILLed caller leaves no JVM behind.
#
# Environment: ZK_START_TIMEOUT (seconds to wait for imok, default 60), ZK_JAVA (default java),
# ZK_JARS (default /usr/share/java), ZK_SERVER_OWNER (pid to watch, default the caller).
set -u

jars=${ZK_JARS:-/usr/share/java}
java=${ZK_JAVA:-java}
start_timeout=${ZK_START_TIMEOUT:-60}

die() {
    echo "zk-server: $*" >&2
    exit 1
}

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}

# The classpath tests/harness.c uses: zookeeper.jar (whose manifest names jute, netty, jetty,
# metrics...), the conf directory, and log4j behind slf4j so a failed start is diagnosable;
# the server logs WARN and above to DIR/server.log.
classpath() {
    local cp=/etc/zookeeper/conf j
    for j in zookeeper slf4j-log4j12 log4j-1.2; do
        [ -r "$jars/$j.jar" ] ||
            die "$jars/$j.jar not found (apt-get install zookeeper libslf4j-java liblog4j1.2-java)"
        cp=$cp:$jars/$j.jar
    done
    echo "$cp"
}

# Sends one four-letter word and prints the answer; bash's /dev/tcp avoids needing nc.
four_letter() {
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' \
        _ "$1" "$2" 2>/dev/null
}

port_in_use() {
    ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}

# A random unprivileged port nobody listens on. Another process may still take it before the
# server binds: start() then sees the JVM exit and tries another port.
pick_port() {
    local p i
    for i in $(seq 50); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        port_in_use "$p" || { echo "$p"; return 0; }
    done
    die "no free port found"
}

write_config() {
    local dir=$1 port=$2 quorum=${3:-}
    cat >"$dir/zoo.cfg" <<EOF
tickTime=2000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
# Demos open one session per process and tests many: no per-address cap.
maxClientCnxns=0
# The flash sale's frozen buyer asks for a short session, so that it expires quickly.
minSessionTimeout=1000
4lw.commands.whitelist=ruok,srvr,mntr,stat,cons
admin.enableServer=false
EOF
    [ -z "$quorum" ] || printf 'initLimit=10\nsyncLimit=5\n%s\n' "$quorum" >>"$dir/zoo.cfg"
}

# Is $1 a live JVM whose command line mentions our config file $2?
is_our_server() {
    local pid=$1 cfg=$2
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$cfg"
}

# Launches the JVM in the background and prints its pid. setsid gives it its own session so a
# Ctrl-C meant for the caller's foreground job is handled by our trap-driven stop instead.
# Lock parents are containers: reaping empty ones every second keeps runs from piling up.
# -XX:-UsePerfData: no hsperfdata file in /tmp to outlive a SIGKILL; java.io.tmpdir: native
# libraries (snappy) unpack into DIR, removed with it.
launch() {
    local dir=$1 main=${2:-org.apache.zookeeper.server.ZooKeeperServerMain} cp
    cp=$(classpath) || exit 1
    setsid "$java" -Xmx512m -XX:+UseSerialGC -XX:-UsePerfData -Xlog:disable \
        -Xlog:all=warning:stderr -Djava.io.tmpdir="$dir" \
        -Dzookeeper.root.logger=WARN,CONSOLE -Dzookeeper.log.dir="$dir" \
        -Dzookeeper.admin.enableServer=false \
        -Dznode.container.checkIntervalMs=1000 \
        -cp "$cp" "$main" "$dir/zoo.cfg" \
        </dev/null >>"$dir/server.log" 2>&1 &
    echo $!
}

# Ready means `ruok` answers imok AND `srvr` reports a mode: imok comes as soon as the port
# listens, while srvr still says "not currently serving requests" and the first sessions are
# dropped. 0 when ready, 1 when the JVM died, 2 on timeout.
wait_ready() {
    local pid=$1 port=$2 deadline=$((SECONDS + start_timeout))
    while [ "$SECONDS" -lt "$deadline" ]; do
        kill -0 "$pid" 2>/dev/null || return 1
        if [ "$(four_letter "$port" ruok)" = imok ] &&
            four_letter "$port" srvr | grep -q '^Mode: '; then
            return 0
        fi
        sleep 0.1
    done
    return 2
}

# Stops the server if the owner goes away. Its descriptors are closed so a caller reading our
# output through a pipe is never kept waiting by it.
start_watchdog() {
    local dir=$1 pid=$2 owner=$3 self
    self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
    (
        while kill -0 "$owner" 2>/dev/null && kill -0 "$pid" 2>/dev/null; do
            sleep 1
        done
        if kill -0 "$pid" 2>/dev/null; then
            ZK_WATCHDOG_CHILD=1 "$self" stop "$dir"
        fi
    ) </dev/null >/dev/null 2>&1 &
    echo $! >"$dir/watchdog.pid"
}

start() {
    local dir=$1 owner=${ZK_SERVER_OWNER:-$PPID} attempt port pid rc
    [ -e "$dir/pid" ] && die "$dir/pid exists: a server may already run there"
    command -v "$java" >/dev/null || die "$java not found (apt-get install default-jre-headless)"
    mkdir -p "$dir/data" || die "cannot create $dir"
    dir=$(cd "$dir" && pwd)
    for attempt in 1 2 3 4 5; do
        port=$(pick_port) || exit 1
        write_config "$dir" "$port"
        pid=$(launch "$dir") || exit 1
        echo "$pid" >"$dir/pid"
        wait_ready "$pid" "$port"
        rc=$?
        if [ "$rc" -eq 0 ]; then
            echo "127.0.0.1:$port" >"$dir/connect"
            start_watchdog "$dir" "$pid" "$owner"
            return 0
        fi
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        rm -f "$dir/pid"
        [ "$rc" -eq 2 ] && break
        # The JVM exited: most likely the port was taken meanwhile; try another.
    done
    echo "zk-server: server did not start; last lines of $dir/server.log:" >&2
    tail -n 20 "$dir/server.log" >&2
    rm -rf "$dir"
    exit 1
}

# The ensemble's client ports, then each server's quorum and election ports: 9 free ports.
pick_ports() {
    local ports=() p
    while [ ${#ports[@]} -lt 9 ]; do
        p=$(pick_port) || exit 1
        [[ " ${ports[*]} " == *" $p "* ]] || ports+=("$p")
    done
    echo "${ports[*]}"
}

# Three QuorumPeerMain JVMs on loopback. A port taken between pick and bind makes a server
# exit or never serve: everything is stopped and tried again on other ports.
start_ensemble() {
    local dir=$1 owner=${ZK_SERVER_OWNER:-$PPID} attempt ports quorum i rc mode
    local connect follower leader
    [ -e "$dir/s1" ] && die "$dir/s1 exists: an ensemble may already run there"
    command -v "$java" >/dev/null || die "$java not found (apt-get install default-jre-headless)"
    mkdir -p "$dir" || die "cannot create $dir"
    dir=$(cd "$dir" && pwd)
    for attempt in 1 2 3; do
        read -ra ports <<<"$(pick_ports)"
        quorum=""
        for i in 1 2 3; do
            quorum+="server.$i=127.0.0.1:${ports[$((i + 2))]}:${ports[$((i + 5))]}"$'\n'
        done
        for i in 1 2 3; do
            mkdir -p "$dir/s$i/data" || die "cannot create $dir/s$i"
            echo "$i" >"$dir/s$i/data/myid"
            write_config "$dir/s$i" "${ports[$((i - 1))]}" "$quorum"
            launch "$dir/s$i" org.apache.zookeeper.server.quorum.QuorumPeerMain >"$dir/s$i/pid" ||
                exit 1
        done
        rc=0
        for i in 1 2 3; do
            wait_ready "$(cat "$dir/s$i/pid")" "${ports[$((i - 1))]}" || rc=1
        done
        if [ "$rc" -eq 0 ]; then
            connect="" follower="" leader=""
            for i in 1 2 3; do
                connect+="${connect:+,}127.0.0.1:${ports[$((i - 1))]}"
                mode=$(four_letter "${ports[$((i - 1))]}" srvr | sed -n 's/^Mode: //p')
                [ "$mode" = leader ] && leader=127.0.0.1:${ports[$((i - 1))]}
                [ "$mode" = follower ] && [ -z "$follower" ] &&
                    follower=127.0.0.1:${ports[$((i - 1))]}
            done
            echo "$connect" >"$dir/connect"
            echo "$follower" >"$dir/follower"
            echo "$leader" >"$dir/leader"
            for i in 1 2 3; do
                start_watchdog "$dir/s$i" "$(cat "$dir/s$i/pid")" "$owner"
            done
            return 0
        fi
        for i in 1 2 3; do
            stop_pid "$(cat "$dir/s$i/pid")" "$dir/s$i/zoo.cfg"
            rm -rf "$dir/s$i"
        done
    done
    echo "zk-server: ensemble did not start; last lines of $dir/s1/server.log:" >&2
    tail -n 20 "$dir/s1/server.log" >&2 2>/dev/null
    rm -rf "$dir"
    exit 1
}

# TERM first so the server closes its sessions cleanly; KILL after 10 s.
stop_pid() {
    local pid=$1 cfg=$2 i
    is_our_server "$pid" "$cfg" || return 0
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 100); do
        is_our_server "$pid" "$cfg" || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    for i in $(seq 50); do
        is_our_server "$pid" "$cfg" || return 0
        sleep 0.1
    done
    die "server $pid does not die"
}

stop() {
    local dir=$1 wd member
    [ -d "$dir" ] || return 0
    dir=$(cd "$dir" && pwd)
    for member in "$dir"/s[0-9]; do
        [ -d "$member" ] && stop "$member"
    done
    if [ -z "${ZK_WATCHDOG_CHILD:-}" ] && [ -r "$dir/watchdog.pid" ]; then
        wd=$(cat "$dir/watchdog.pid")
        kill "$wd" 2>/dev/null
    fi
    if [ -r "$dir/pid" ]; then
        stop_pid "$(cat "$dir/pid")" "$dir/zoo.cfg" || exit 1
    fi
    rm -rf "$dir"
}

[ $# -eq 2 ] || usage
case $1 in
start) start "$2" ;;
start-ensemble) start_ensemble "$2" ;;
stop) stop "$2" ;;
*) usage ;;
esac
