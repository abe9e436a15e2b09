# leaks: clean
"""Clean (warm-up): nn.LazyLinear materialises its weights at the first forward;
the optimizer's momentum buffers appear at the first step."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.LazyLinear(512), nn.ReLU(), nn.LazyLinear(10))
model(torch.zeros(1, 128))  # materialise before handing the parameters to the optimizer
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"last loss {loss.item():.4f}")
