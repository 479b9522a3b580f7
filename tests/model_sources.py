"""Model source text that end-to-end tests write into their temporary projects, kept once.

`MLP` is the tiny model most tests count: Linear(8, hidden) -> ReLU -> Linear(hidden, 2); with hidden=4 and a
[2, 8] input it costs 2*(8*4 + 4*2) = 80 MACs.
"""

MLP_CLASS = """\
class MLP(nn.Module):
    def __init__(self, hidden=HIDDEN):
        super().__init__()
        self.fc1 = nn.Linear(8, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))
"""

#: The imports and the width the MLP needs, then the class.
MLP_MODULE = "import torch\nfrom torch import nn\n\nHIDDEN = 4\n\n\n" + MLP_CLASS
