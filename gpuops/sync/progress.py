"""How a copy reports its progress: the methods it calls, here doing nothing (for machines, and
for several hosts at once). The bar that draws them for people is gpuops.render.syncbar, which a
face passes in: sync draws nothing itself."""


class Silent:
    """Also a context: leaving it ends whatever is shown (a bar, a phase's spinner), on success,
    error or Ctrl-C alike, so the verdict that follows has a line of its own and the terminal its
    cursor back."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, total: int, what="", files=None) -> None:
        pass

    def update(self, done, files=None) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def stage(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass
