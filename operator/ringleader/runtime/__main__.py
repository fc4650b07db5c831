"""`python -m ringleader.runtime`: run this rank (see main.py), or in a pod of several ranks their agent (agent.py),
then leave without interpreter finalization.

The heartbeat and watchdog threads are daemons that may sit inside a TCPStore call when the rank is
done. Finalization would stop them mid-call, and the C++ below them aborts the process (SIGABRT,
"terminate called without an active exception"), turning a finished rank into a failed one. Every
record, summary and log line is written and flushed by the time main() returns.
"""

import os
import sys
import traceback

from ringleader.contract import environment as contract


def _is_agent() -> bool:
    """Whether this process is the agent of a pod of several ranks (runtime/agent.py), which imports no torch."""
    try:
        return contract.PodEnvironment.from_environ(os.environ).is_agent
    except contract.ContractError:
        return False  # the rank says what is wrong (main.read_contract)


try:
    if _is_agent():
        from ringleader.runtime import agent

        code = agent.main()
    else:
        from ringleader.runtime import main

        code = main.main()
except SystemExit as exit_:
    code = exit_.code if isinstance(exit_.code, int) else 1
except BaseException:  # noqa: BLE001 - printed as Python would, then the same exit without finalization
    traceback.print_exc()
    code = 1
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
