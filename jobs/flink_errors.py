"""What a Java exception raised through PyFlink says, in a few lines a person reads.

A job that fails to start or stops raises its Java exception through py4j: either py4j's
``Py4JJavaError`` or, for the exception types PyFlink maps (``TableException``,
``ValidationException``, ...), PyFlink's own ``JavaException``. Both carry the whole Java stack
trace as text, often a hundred frames, and its first line rarely names the cause: "Failed to
execute sql" is a ``TableException`` wrapping the real reason several ``Caused by:`` levels down.
:func:`java_failure` keeps each exception of the chain and drops the frames.

>>> print(java_failure_text('''An error occurred while calling o9.executeSql.
... : org.apache.flink.table.api.TableException: Failed to execute sql
... \\tat org.apache.flink.table.api.internal.TableEnvironmentImpl.executeInternal(TableEnvironmentImpl.java:1313)
... Caused by: java.lang.RuntimeException: java.io.IOException: Unexpected magic number.
... \\t... 12 more
... Caused by: java.io.IOException: Unexpected magic number.
... \\tat org.apache.flink.runtime.checkpoint.Checkpoints.loadCheckpointMetadata(Checkpoints.java:113)
... \\t... 5 more'''))
org.apache.flink.table.api.TableException: Failed to execute sql
  caused by: java.io.IOException: Unexpected magic number.
"""

from __future__ import annotations

import re

#: A stack trace line that names a frame (``\tat a.B.c(B.java:1)``) or elides some (``\t... 3 more``).
_FRAME = re.compile(r"^\s+(at \S|\.\.\. \d+ more\s*$)")
#: The line that starts a cause or a suppressed exception, and what follows its label.
_CHAINED = re.compile(r"^\s*(Caused by|Suppressed): (.*)$")
#: py4j's first line ("An error occurred while calling o9.executeSql.") and the ": " before the exception.
_PY4J_HEADER = re.compile(r"^An error occurred while calling \S+\.\s*$")


def is_stack_frame(line: str) -> bool:
    """True for a Java stack trace line that names a frame or elides frames."""
    return bool(_FRAME.match(line))


def java_failure(exc: BaseException, message_lines: int = 3) -> str | None:
    """The exceptions of the Java failure ``exc`` carries (:func:`java_failure_text`); None when ``exc``
    did not come from the JVM."""
    from py4j.protocol import Py4JJavaError
    from pyflink.util.exceptions import JavaException

    if not isinstance(exc, (Py4JJavaError, JavaException)):
        return None
    return java_failure_text(str(exc), message_lines)


def java_failure_text(trace: str, message_lines: int = 3) -> str:
    """Each exception of the Java stack trace ``trace``, outermost first, without its frames.

    A cause is written ``caused by: <class>: <message>``; a message longer than ``message_lines``
    lines is cut, saying how many lines were left out; a wrapper whose message is only its cause
    (``RuntimeException: java.io.IOException: ...`` above that ``IOException``) is left out.
    """
    chain = _exceptions(trace)
    kept = [lines for lines, cause in zip(chain, chain[1:] + [None]) if cause is None or not _repeats(lines, cause)]
    out: list[str] = []
    for depth, (head, *rest) in enumerate(kept):
        shown = rest[:message_lines - 1]
        out.append(f"{'  caused by: ' if depth else ''}{head}")
        out += [f"    {line}" for line in shown]
        left = len(rest) - len(shown)
        if left:
            out.append(f"    ({left} more line{'s' if left > 1 else ''})")
    return "\n".join(out)


def _exceptions(trace: str) -> list[list[str]]:
    """The trace's exceptions, each as its message's lines (the first with the class name)."""
    chain: list[list[str]] = []
    for line in trace.splitlines():
        if is_stack_frame(line) or _PY4J_HEADER.match(line) or not line.strip():
            continue
        chained = _CHAINED.match(line)
        if chained or not chain:
            text = chained.group(2) if chained else line.removeprefix(": ")
            chain.append([text.strip()])
        else:
            chain[-1].append(line.strip())
    return chain


def _repeats(wrapper: list[str], cause: list[str]) -> bool:
    """True when ``wrapper``'s message is its cause's whole first line (Java's ``new X(cause)``)."""
    _, _, message = wrapper[0].partition(": ")
    return len(wrapper) == 1 and message == cause[0]
