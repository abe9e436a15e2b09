# recall case: keras-team/keras#9151 (a user's reinforcement-learning script)
# bug: the model is compiled again in every episode, and memory grows until it runs out;
#      the maintainer's fix: compile once, or build in a fresh graph/`clear_session()`.
# reproduction written here (the pattern, not the project's code); the loop follows the code quoted in the issue.
# expect: OOM115
from keras.layers import Dense
from keras.models import Sequential


def run(x, y, episodes, customized_loss):
    model = Sequential()
    model.add(Dense(32, input_dim=4, activation="relu"))
    model.add(Dense(5))
    for i in range(episodes):
        model.compile(loss=customized_loss, optimizer="rmsprop")  # bug
        model.fit(x, y)
