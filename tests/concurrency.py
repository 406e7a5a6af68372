"""Running a test's function on several threads at once."""
import threading


def run_threads(target, args_list):
    """target(*args) on one thread per entry of `args_list`, all started before
    any is joined; returns when every one has finished."""
    threads = [threading.Thread(target=target, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
